// Task rewards and the per-sample command reward (reward.h).
#include "anvil/rl/reward.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "anvil/core/child_groups.h"

extern char** environ;

namespace anvil::rl {
namespace {

bool IsNumber(std::string_view s) {
  if (s.empty() || s.size() > 18) return false;
  for (const char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Space-separated numbers, single spaces.
bool IsNumberList(std::string_view s) {
  size_t start = 0;
  while (true) {
    const size_t space = s.find(' ', start);
    if (!IsNumber(s.substr(start, space == std::string_view::npos ? s.npos : space - start))) {
      return false;
    }
    if (space == std::string_view::npos) return true;
    start = space + 1;
  }
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

RewardResult CancelledReward() {
  RewardResult r;
  r.cancelled = true;
  r.error = "reward command stopped: the run was asked to stop";
  return r;
}

}  // namespace

std::string_view AnswerOf(std::string_view completion) {
  return Trim(completion.substr(0, completion.find('\n')));
}

RewardResult TaskReward(Task task, const Problem& problem, std::string_view completion,
                        double format_weight) {
  RewardResult r;
  const std::string_view answer = AnswerOf(completion);
  r.well_formed = task == Task::kSorting ? IsNumberList(answer)
                  : task == Task::kPairs ? !answer.empty()
                                         : IsNumber(answer);
  r.correct = answer == AnswerOf(problem.answer);  // (a pair's answer may hold spaces around it)
  r.reward = (r.correct ? 1.0 : 0.0) + (r.well_formed ? format_weight : 0.0);
  return r;
}

CommandReward::CommandReward(std::string command, double timeout_seconds)
    : command_(std::move(command)), timeout_seconds_(timeout_seconds) {}

RewardResult CommandReward::Score(std::string_view prompt, std::string_view completion,
                                  const std::function<bool()>& cancel) const {
  RewardResult r;
  const std::string input =
      nlohmann::json{{"prompt", std::string(prompt)}, {"completion", std::string(completion)}}
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
      "\n";
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) {
    r.error = fmt::format("reward command: pipe: {}", std::strerror(errno));
    return r;
  }
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    r.error = fmt::format("reward command: pipe: {}", std::strerror(errno));
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  // The command in a process group of its own (so a timeout kills all it
  // started), with default signal dispositions and an empty mask.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t pipe_set, empty;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &pipe_set);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETSIGMASK);
  const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
  // Tracked, so that a second Ctrl-C, which ends anvil at once, kills the
  // group first (none starts once that has begun: `spawned` stays -1).
  int spawned = -1;
  const pid_t pid = SpawnTrackedGroup([&] {
    pid_t child = 0;
    spawned =
        posix_spawn(&child, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
    return spawned == 0 ? child : 0;
  });
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  if (spawned != 0) {
    close(in[1]);
    close(out[0]);
    if (spawned < 0) return CancelledReward();
    r.error = fmt::format("reward command: cannot start /bin/sh: {}", std::strerror(spawned));
    return r;
  }
  // Feed stdin and read stdout together (either may fill a pipe), until the
  // output closes or the time is up. A command that exits without reading
  // its input must not kill us: SIGPIPE is blocked in this thread while we
  // write, and one it raised is taken back before unblocking.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds_);
  auto ms_left = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
  };
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  size_t written = 0;
  std::string output;
  bool timed_out = false;
  bool cancelled = false;
  constexpr size_t kMaxOutput = size_t{1} << 20;
  int write_fd = in[1];
  fcntl(write_fd, F_SETFL, O_NONBLOCK);
  while (true) {
    const int64_t left = ms_left();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    if (cancel && cancel()) {
      cancelled = true;
      break;
    }
    pollfd fds[2] = {{out[0], POLLIN, 0}, {write_fd, POLLOUT, 0}};
    const int wait_ms = static_cast<int>(cancel ? std::min<int64_t>(left, kCancelPollMs) : left);
    const int n = poll(fds, write_fd >= 0 ? 2 : 1, wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (write_fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t w = write(write_fd, input.data() + written, input.size() - written);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 || written == input.size()) {
        close(write_fd);
        write_fd = -1;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[4096];
      const ssize_t got = read(out[0], buf, sizeof(buf));
      if (got <= 0) break;  // the command closed its output
      output.append(buf, static_cast<size_t>(got));
      if (output.size() > kMaxOutput) break;
    }
  }
  if (write_fd >= 0) close(write_fd);
  close(out[0]);
  const timespec now{0, 0};
  while (sigtimedwait(&pipe_set, nullptr, &now) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  // The shell's exit, within the time left; then nothing of the command's
  // process group outlives the call. The shell is reaped only after the
  // group is killed and untracked: until then its zombie holds the group's
  // id, so this kill cannot reach a process that reused it (a second
  // Ctrl-C's, from the handler, could in the moment between the untrack and
  // the reap, just before the process ends).
  bool status_lost = false;
  while (!timed_out && !cancelled) {
    siginfo_t info{};
    const int waited = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    if (waited == 0 && info.si_pid == pid) break;  // exited, not yet reaped
    if (waited < 0 && errno == ECHILD) {           // reaped by the kernel: SIGCHLD is ignored
      status_lost = true;
      break;
    }
    if (ms_left() <= 0) {
      timed_out = true;
      break;
    }
    if (cancel && cancel()) {
      cancelled = true;
      break;
    }
    usleep(1000);
  }
  if (!status_lost) kill(-pid, SIGKILL);  // (no zombie holds the id then: it may be reused)
  UntrackChildGroup(pid);
  int status = 0;
  while (!status_lost && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (status_lost) {
    r.error = "reward command: its exit status was lost (anvil runs with SIGCHLD ignored)";
    return r;
  }
  if (cancelled) return CancelledReward();
  if (output.size() > kMaxOutput) {  // (its pipe then closed under it: SIGPIPE)
    r.error = "reward command printed more than 1 MiB";
    return r;
  }
  if (timed_out) {
    r.error = fmt::format("reward command timed out after {:g} s", timeout_seconds_);
    return r;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    r.error = WIFEXITED(status) ? fmt::format("reward command exited with {}", WEXITSTATUS(status))
                                : fmt::format("reward command died of signal {}", WTERMSIG(status));
    return r;
  }
  const std::string_view text = Trim(output);
  char* end = nullptr;
  const std::string copy(text);
  const double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(value)) {
    r.error = fmt::format("reward command printed '{}', not one number",
                          copy.substr(0, 60));
    return r;
  }
  // Advantages and losses scale with the rewards: past this they overflow.
  if (!(std::fabs(value) <= kMaxCommandReward)) {
    r.error = fmt::format("reward command printed {:g}, beyond +-{:g}", value, kMaxCommandReward);
    return r;
  }
  r.reward = value;
  return r;
}

std::vector<RewardResult> CommandReward::ScoreAll(std::span<const RewardInput> inputs, int at_once,
                                                  const std::function<bool()>& cancel) const {
  std::vector<RewardResult> results(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    while (true) {
      const size_t i = next.fetch_add(1);
      if (i >= inputs.size()) return;
      results[i] = cancel && cancel() ? CancelledReward()
                                      : Score(inputs[i].prompt, inputs[i].completion, cancel);
    }
  };
  const size_t threads = std::min(inputs.size(), static_cast<size_t>(std::max(at_once, 1)));
  std::vector<std::thread> helpers;
  try {
    for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  } catch (const std::system_error&) {
    // Out of threads (a process limit): the ones started and this one do the rest.
  }
  work();
  for (std::thread& t : helpers) t.join();
  return results;
}

}  // namespace anvil::rl
