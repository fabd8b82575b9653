// `anvil train`: pre-train from a TOML config (or resume a run folder) with a
// progress line, Ctrl-C -> checkpoint -> clean exit. Parsing and printing
// only; the loop is train::Trainer.
#include <fmt/core.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "anvil/agreed_failure.h"
#include "anvil/comm/world.h"
#include "anvil/commands.h"
#include "anvil/core/config.h"
#include "anvil/core/cpu_features.h"
#include "anvil/parallel/config.h"
#include "anvil/profile/machine.h"
#include "anvil/train/progress.h"
#include "anvil/train/trainer.h"

namespace anvil::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct TrainOptions {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  std::string resume;
  bool trace = false;
  bool probe = false;
  std::string probe_fault;
};

int Fail(const Status& s) {
  fmt::print(stderr, "anvil train: {}\n", s.ToString());
  return 1;
}

// `agreed`: the failure is one every rank returned with (the setup's).
int RunTrain(const TrainOptions& o, std::shared_ptr<comm::Group> world, Status* failure,
             bool* agreed);

// Under mpirun every rank runs this command; rank 0 alone prints progress.
// A setup error is said once where every rank has it, and the job ends
// cleanly. A rank that fails later ends the whole job (another may be waiting
// in a collective for it); a rank that failed only because another did
// waits a moment first, so the rank with the cause prints it before the job
// goes down.
int RunTrainInWorld(const TrainOptions& o) {
  auto world = comm::InitWorld();
  if (!world.ok()) return Fail(world.status());
  Status failure = Status::Ok();
  bool agreed = false;
  const int rc = RunTrain(o, *world, &failure, &agreed);
  if (rc != 0 && (*world)->size() > 1 && !agreed) {
    // A moment for mpirun to forward what this rank printed, longer for a
    // rank that only saw another's failure.
    std::this_thread::sleep_for(failure.code() == StatusCode::kAborted
                                    ? std::chrono::milliseconds(2000)
                                    : std::chrono::milliseconds(300));
    comm::AbortWorld(rc);
  }
  world->reset();
  comm::FinalizeWorld();
  return rc;
}

// The run folder and the config of `o` (its --set applied): the same on
// every rank, no collective.
Result<Config> ReadTrainConfig(const TrainOptions& o, std::string* run_dir) {
  const bool resume = !o.resume.empty();
  if (resume == !o.config.empty()) {
    return InvalidArgument("give either --config FILE (a new run) or --resume RUN_DIR");
  }
  *run_dir = o.out;
  if (resume) {
    if (!run_dir->empty() && std::filesystem::path(*run_dir) != std::filesystem::path(o.resume)) {
      return InvalidArgument("--out and --resume name different folders");
    }
    *run_dir = o.resume;
  } else if (run_dir->empty()) {
    *run_dir = "runs/" + std::filesystem::path(o.config).stem().string();
  }
  ASSIGN_OR_RETURN(Config config, Config::FromFile(resume ? *run_dir + "/config.toml" : o.config));
  for (const std::string& s : o.sets) RETURN_IF_ERROR(config.Set(s));
  return config;
}

int RunTrain(const TrainOptions& o, std::shared_ptr<comm::Group> world, Status* failure,
             bool* agreed) {
  const bool root = world->rank() == 0;
  auto Fail = [&](const Status& s) {
    *failure = s;
    if (world->size() > 1) {
      fmt::print(stderr, "anvil train: [rank {}] {}\n", world->rank(), s.ToString());
      return 1;
    }
    return cli::Fail(s);
  };
  // Up to a trainer, every failure is every rank's (agreed on before the
  // trainer's setup collectives, which agree on theirs).
  auto FailAgreed = [&](const Status& s) {
    *failure = s;
    *agreed = true;
    if (world->size() == 1) return cli::Fail(s);
    SayAgreedFailure(*world, s, "anvil train");
    return 1;
  };
  const bool resume = !o.resume.empty();
  std::string run_dir;
  Result<Config> config = ReadTrainConfig(o, &run_dir);
  if (world->size() > 1) {
    const Status read = comm::AgreeOnStatus(*world, config.status(), "reading the config");
    if (!read.ok()) return FailAgreed(read);
  }
  if (!config.ok()) return FailAgreed(config.status());
  // The watchdog's limit from the start: setup and resume run collectives too.
  {
    Config probe = *config;  // (reading marks keys used; the trainer reads them again)
    const auto parallel = parallel::ParallelConfig::FromConfig(probe);
    if (parallel.ok()) comm::SetWatchdogTimeout(parallel->timeout_s);
  }

  train::InstallStopHandler();
  if (root) {
    fmt::print("anvil train: {} {}, run folder {}{}\n", resume ? "resuming" : "config",
               resume ? run_dir : o.config, run_dir,
               world->size() > 1 ? fmt::format(", {} ranks", world->size()) : std::string());
  }
  std::fflush(stdout);
  auto trainer = train::Trainer::Create(std::move(*config),
                                        train::RunOptions{.run_dir = run_dir,
                                                          .resume = resume,
                                                          .trace = o.trace,
                                                          .probe = o.probe,
                                                          .probe_fault = o.probe_fault,
                                                          .world = world});
  if (!trainer.ok()) return FailAgreed(trainer.status());
  train::Trainer& t = **trainer;
  comm::SetWatchdogTimeout(t.parallel_config().timeout_s);
  if (!root) {  // the same loop, silent
    auto summary = t.Run(train::Hooks{.stop_requested = [] { return train::StopRequested(); }});
    return summary.ok() ? 0 : Fail(summary.status());
  }
  const train::TrainConfig& tc = t.train_config();
  const model::ModelConfig& mc = t.model_config();
  fmt::print("resolved config (saved as {}/config.toml):\n{}", run_dir, t.resolved_config());
  fmt::print("model: {:.2f} M parameters ({:.2f} M non-embedding), {:.1f} MFLOP/token; "
             "{} threads, {} precision{}, peak {:.0f} GFLOP/s\n",
             mc.NumParams() / 1e6, mc.NumNonEmbeddingParams() / 1e6,
             mc.FlopsPerToken(tc.seq_len) / 1e6, t.threads(), model::PrecisionName(tc.precision),
             !tc.precision_auto ? ""
             : tc.precision == model::Precision::kBF16
                 ? (AmxEnabled() && BestIsa() == Isa::kAvx512
                        ? " (auto: this CPU's AMX tiles outrun its f32 FMA)"
                        : " (auto: this CPU's bf16 dot product outruns its f32 FMA)")
                 : " (auto: this CPU's f32 FMA is as fast as or faster than its bf16 path)",
             t.peak_gflops());
  if (model::IsFp8(tc.precision)) {
    const int64_t kept = tc.fp8_high_precision_layers;
    fmt::print(
        "fp8: decoded to {} for the dot products; the LM head{} in {}{}\n",
        tc.fp8_decode == kernels::Fp8Decode::kBf16 ? "bf16" : "f32",
        kept > 0 ? fmt::format(" and the first and last {} layer{}", kept, kept > 1 ? "s" : "")
                 : std::string(),
        tc.fp8_high_precision_name(), tc.fp8_high_precision_auto ? " (auto: the faster here)" : "");
  }
  const long available = profile::AvailableMemoryBytes();
  fmt::print("memory: about {:.2f} GiB for weights, grads, optimizer state and activations "
             "({})\n",
             t.memory_estimate() / kGiB,
             available >= 0 ? fmt::format("{:.1f} GiB available", available / kGiB)
                            : std::string("available memory unknown"));
  if (world->size() > 1) {
    const parallel::ParallelConfig& pc = t.parallel_config();
    fmt::print("data parallel: {} ranks, ZeRO-{}, {:g} MB gradient buckets{}; comm.timeout_s = {:g}\n",
               world->size(), pc.zero, pc.bucket_mb,
               pc.overlap ? " reduced during the backward" : " reduced after the backward",
               pc.timeout_s);
  }
  fmt::print("{} steps of {} tokens ({} x {} x {} accumulated{}){}{}\n", tc.steps,
             tc.tokens_per_step() * world->size(), tc.batch_size, tc.seq_len, tc.grad_accum,
             world->size() > 1 ? fmt::format(" x {} ranks", world->size()) : std::string(),
             !resume ? std::string()
             : t.step() < tc.steps
                 ? fmt::format(", resuming after step {}", t.step())
                 : fmt::format(", all done (raise train.steps to go on past step {})", t.step()),
             tc.time_budget_minutes > 0
                 ? fmt::format("; at most, fitted to train.time_budget_minutes = {:g} once a few "
                               "steps are timed{}",
                               tc.time_budget_minutes,
                               tc.time_budget_refit ? " and checked as the run goes" : "")
                 : std::string());
  if (!t.resume_note().empty()) fmt::print("note: {}\n", t.resume_note());
  std::fflush(stdout);

  train::Progress progress(t.step(), tc.steps, tc.log_every);
  auto summary =
      t.Run(train::Hooks{.on_step = [&](const train::StepMetrics& m) { progress.OnStep(m); },
                         .on_eval = [&](const train::EvalMetrics& m) { progress.OnEval(m); },
                         .on_message = [&](const std::string& text) { progress.Message(text); },
                         .on_schedule = [&](int64_t total) { progress.SetTotal(total); },
                         .stop_requested = [] { return train::StopRequested(); }});
  progress.Finish();
  if (!summary.ok()) return Fail(summary.status());
  const train::RunSummary& s = *summary;
  if (s.interrupted) {
    fmt::print(
        "interrupted ({}) after step {}/{}; checkpoint {}\n"
        "resume with: anvil train --resume {}\n",
        train::StopSignalName(), s.steps_done, tc.steps, s.checkpoint, run_dir);
    return 0;
  }
  if (s.time_limited) {
    fmt::print("stopped by train.max_minutes after step {}/{}; resume with: anvil train --resume {}\n",
               s.steps_done, tc.steps, run_dir);
  }
  const int64_t steps = s.steps_done - s.first_step;
  fmt::print("done: {} step{} in {:.1f} s; final val_loss {}; checkpoint {}\n", steps,
             steps == 1 ? "" : "s", s.seconds,
             s.final_val_loss ? fmt::format("{:.4f}", *s.final_val_loss) : "n/a", s.checkpoint);
  return 0;
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Pre-train a Llama model from a TOML config");
  cmd->add_option("--config", o->config, "Run config (TOML: [model], [train], [optim], [data])");
  cmd->add_option("--set", o->sets, "Override a config key: key=value (repeatable)");
  cmd->add_option("--out", o->out, "Run folder (default: runs/<config name>)")
      ->check(NonEmptyPath());
  cmd->add_option("--resume", o->resume, "Continue the run in this folder from its latest checkpoint");
  cmd->add_flag("--trace", o->trace, "Write a Chrome trace (trace.json) of a few steps");
  cmd->add_flag("--probe", o->probe,
                "Record per-tensor numerics of the first train.probe_steps steps (probe.jsonl; "
                "compare two runs with `anvil probe diff`)");
  cmd->add_option("--probe-fault", o->probe_fault,
                  "Testing the probe: NAME=FACTOR scales the probed tensor NAME (e.g. "
                  "layers.1.attn_out=1.01) in every probed step");
  cmd->callback([o] {
    if (const int rc = RunTrainInWorld(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
