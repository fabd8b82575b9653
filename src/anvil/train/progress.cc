// Progress line / plain log lines and the stop-signal flag (see progress.h).
#include "anvil/train/progress.h"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>

#include "anvil/comm/world.h"
#include "anvil/core/child_groups.h"
#include "anvil/core/clock.h"

namespace anvil::train {
namespace {

std::atomic<int> g_stop_signal{0};

// The first signal asks the run to stop; a second ends the process, and the
// process groups it started (reward commands) with it.
void OnStopSignal(int signal) {
  if (g_stop_signal.exchange(signal) != 0) {
    EndChildGroups();
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}

std::string Duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "--:--";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{:02}:{:02}", s / 60, s % 60);
}

}  // namespace

Progress::Progress(int64_t first_step, int64_t total_steps, int64_t log_every, std::FILE* out)
    : out_(out),
      // Open MPI hands every rank a pseudo-terminal for stdout even where
      // mpirun's own output goes to a file: a launched rank writes plain
      // lines, which a log file keeps readable (redrawn lines would be one).
      tty_(::isatty(::fileno(out)) != 0 && !comm::UnderMpiLauncher()),
      first_step_(first_step),
      total_(total_steps),
      log_every_(log_every),
      start_(NowSeconds()) {}

void Progress::Clear() {
  if (tty_ && line_open_) {
    std::fputs("\r\033[2K", out_);
    line_open_ = false;
  }
}

void Progress::OnStep(const StepMetrics& m) {
  smoothed_tps_ = smoothed_tps_ == 0 ? m.tokens_per_s : 0.9 * smoothed_tps_ + 0.1 * m.tokens_per_s;
  // MFU of the smoothed rate (per-token FLOPs are fixed, so it scales).
  const double mfu = m.tokens_per_s > 0 ? m.mfu * smoothed_tps_ / m.tokens_per_s : 0.0;
  // "  mfu x%", or nothing where the run does not measure its peak (sft).
  const std::string mfu_text = std::isnan(mfu) ? "" : fmt::format("  mfu {:.1f}%", 100 * mfu);
  if (tty_) {
    DrawStep(m.step, fmt::format("loss {:.4f}  lr {:.2e}  {:.0f} tok/s{}", m.loss, m.lr,
                                 smoothed_tps_, mfu_text));
    return;
  }
  const int64_t done = m.step - first_step_;
  if (m.step % log_every_ == 0 || m.step == total_ || done == 1) {
    std::fputs(fmt::format("step {}/{}  loss {:.4f}  lr {:.2e}  grad_norm {:.3f}  {:.0f} tok/s{}  "
                           "elapsed {}  ETA {}\n",
                           m.step, total_, m.loss, m.lr, m.grad_norm, smoothed_tps_, mfu_text,
                           Duration(NowSeconds() - start_), Duration(Eta(m.step)))
                   .c_str(),
               out_);
  }
  std::fflush(out_);
}

double Progress::Eta(int64_t step) const {
  const int64_t done = step - first_step_;
  return done > 0 ? (NowSeconds() - start_) / done * static_cast<double>(total_ - step) : -1;
}

void Progress::DrawStep(int64_t step, const std::string& fields) {
  if (!tty_) return;
  const int width = 24;
  const int filled =
      static_cast<int>(width * std::clamp<int64_t>(step, 0, total_) / std::max<int64_t>(1, total_));
  const std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
  last_line_ =
      fmt::format("[{}] step {}/{}  {}  ETA {}", bar, step, total_, fields, Duration(Eta(step)));
  std::fputs(("\r\033[2K" + last_line_).c_str(), out_);
  line_open_ = true;
  std::fflush(out_);
}

void Progress::OnEval(const EvalMetrics& m) {
  Message(fmt::format("step {}/{}  val_loss {:.4f} ({} tokens, {:.1f} s)", m.step, total_,
                      m.val_loss, m.val_tokens, m.seconds));
}

void Progress::Message(const std::string& text) {
  Clear();
  std::fputs((text + "\n").c_str(), out_);
  if (tty_ && !last_line_.empty()) {
    std::fputs(last_line_.c_str(), out_);
    line_open_ = true;
  }
  std::fflush(out_);
}

void Progress::Finish() {
  if (tty_ && line_open_) std::fputs("\n", out_);
  line_open_ = false;
  last_line_.clear();
  std::fflush(out_);
}

void InstallStopHandler() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_stop_signal.load() != 0; }
const char* StopSignalName() {
  switch (g_stop_signal.load()) {
    case SIGINT:
      return "Ctrl-C";
    case SIGTERM:
      return "SIGTERM";
    default:
      return "another rank's stop signal";
  }
}
void ResetStopSignal() { g_stop_signal.store(0); }

}  // namespace anvil::train
