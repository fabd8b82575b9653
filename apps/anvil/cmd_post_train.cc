// `anvil sft` and `anvil rl`: post-training on a task with verifiable answers
// (supervised fine-tuning, then GRPO), from a TOML config or a run folder to
// resume. Parsing and printing only; the runs are rl::RunSft and rl::RunRl.
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
#include "anvil/rl/remote_rollouts.h"
#include "anvil/rl/rl_run.h"
#include "anvil/rl/sft.h"
#include "anvil/train/progress.h"

namespace anvil::cli {
namespace {

struct PostOptions {
  std::string config;
  std::vector<std::string> sets;
  std::string out;
  std::string resume;
};

// The run config and folder of a new run (--config) or a resumed one (--resume).
Result<Config> LoadRun(const PostOptions& o, const char* kind, rl::PostRunOptions& run,
                       bool prints = true) {
  const bool resume = !o.resume.empty();
  if (resume == !o.config.empty()) {
    return InvalidArgument("give either --config FILE (a new run) or --resume RUN_DIR");
  }
  run.resume = resume;
  run.run_dir = resume ? o.resume : o.out;
  if (resume && !o.out.empty() &&
      std::filesystem::path(o.out) != std::filesystem::path(o.resume)) {
    return InvalidArgument("--out and --resume name different folders");
  }
  if (run.run_dir.empty()) {
    run.run_dir = "runs/" + std::filesystem::path(o.config).stem().string();
  }
  ASSIGN_OR_RETURN(Config config,
                   Config::FromFile(resume ? run.run_dir + "/config.toml" : o.config));
  for (const std::string& s : o.sets) RETURN_IF_ERROR(config.Set(s));
  if (!prints) return config;  // another trainer rank's
  fmt::print("anvil {}: {} {}, run folder {}\n", kind, resume ? "resuming" : "config",
             resume ? run.run_dir : o.config, run.run_dir);
  std::fflush(stdout);
  return config;
}

std::string Percent(double share) { return fmt::format("{:.1f}%", 100 * share); }

// A line of its own: past the progress line where there is one.
void Say(train::Progress* progress, const std::string& text) {
  if (progress != nullptr) {
    progress->Message(text);
  } else {
    fmt::print("{}\n", text);
    std::fflush(stdout);
  }
}

// "held-out 52.0% (step 250)", or "held-out -" before the first evaluation.
std::string HeldOut(const rl::RlStepMetrics& m) {
  if (m.heldout_step < 0) return "held-out -";
  return fmt::format("held-out {} (step {})", Percent(m.heldout_accuracy), m.heldout_step);
}

// An RL step in short, for the progress line redrawn each step.
std::string RlStepShort(const rl::RlStepMetrics& m) {
  return fmt::format("reward {:.3f}  train acc {}  {}  {:.2f} s", m.policy.mean_reward,
                     Percent(m.train_accuracy), HeldOut(m), m.seconds);
}

// An RL step in full (and lines under it for what the run has besides).
std::string RlStepLines(const rl::RlStepMetrics& m, int64_t total_steps) {
  const rl::PolicyStepResult& g = m.policy;
  // The trainer's time: waiting for rollouts (drawing them, when colocated)
  // and training.
  const double busy = std::max(m.rollout_wait_seconds + g.train_seconds, 1e-9);
  std::string text = fmt::format(
      "rl step {}/{}  reward {:.3f}  train acc {}  {}  entropy {:.3f}  len {:.1f}  clip {:.3f}  "
      "kl(ref) {:.4f}  |dlogp| {:g}  kl(rollout) {:g}  rollout {:.0f} tok/s ({:.0f}%{})  train "
      "{:.0f} tok/s ({:.0f}%)  {:.2f} s",
      m.step, total_steps, g.mean_reward, Percent(m.train_accuracy), HeldOut(m), g.entropy,
      g.mean_completion_tokens, g.clip_fraction, g.kl, g.max_logprob_diff, g.rollout_kl,
      static_cast<double>(g.rollout_tokens) / std::max(g.rollout_seconds, 1e-9),
      100 * m.rollout_wait_seconds / busy,
      g.staleness > 0 ? fmt::format(" waiting, {} step stale", g.staleness) : "",
      static_cast<double>(g.tokens) / std::max(g.train_seconds, 1e-9), 100 * g.train_seconds / busy,
      m.seconds);
  if (m.ppo) {
    text += fmt::format(
        "\n    value loss {:.4f}  value clip {:.3f}  explained variance {:.3f}  mean value {:.3f}",
        g.value_loss, g.value_clip_fraction, g.explained_variance, g.value_mean);
  }
  if (m.reward_command) {
    text += fmt::format(
        "\n    reward command: {:.2f} s for {} samples{}", m.reward_seconds, m.samples,
        m.reward_errors == 0
            ? ""
            : fmt::format(", failed on {} (reward 0): {}", m.reward_errors, m.reward_error));
  }
  if (g.max_logprob_diff != 0) {  // quantized or stale rollouts: the correction
    text += fmt::format("\n    importance weights: mean {:.4f}, {} cut to rl.tis_cap", g.tis_mean,
                        Percent(g.tis_truncated));
  }
  return text;
}

std::string EvalLine(const char* kind, int64_t step, const rl::TaskEval& e) {
  return fmt::format(
      "{} step {}: held-out accuracy {} of {} problems (well-formed {}, {:.1f} tokens, {:.1f} s); "
      "e.g. {}",
      kind, step, Percent(e.accuracy), e.problems, Percent(e.well_formed), e.mean_tokens, e.seconds,
      e.example);
}

void PrintSummary(const char* kind, const rl::PostRunSummary& s, const std::string& run_dir) {
  if (s.stopped_early) {
    fmt::print("stopped after step {}; resume with: anvil {} --resume {}\n", s.steps_done, kind,
               run_dir);
  }
  // (the start's accuracy is step 0's; a run stopped before its first
  // evaluation after that has nothing to compare it with)
  std::string change;
  if (s.first_eval && s.last_eval && s.last_eval_step > 0) {
    change = fmt::format(" (from {} at the start: {:+.1f} points)", Percent(s.first_eval->accuracy),
                         100 * (s.last_eval->accuracy - s.first_eval->accuracy));
  }
  // (a stopped run skips the final evaluation: its last one was earlier)
  const std::string earlier_eval = s.last_eval && s.last_eval_step != s.steps_done
                                       ? fmt::format(" at step {}", s.last_eval_step)
                                       : "";
  const int64_t steps = s.steps_done - s.first_step;
  fmt::print("done: {} step{} in {:.1f} s; held-out accuracy {}{}{}; checkpoint {}\n", steps,
             steps == 1 ? "" : "s", s.seconds, s.last_eval ? Percent(s.last_eval->accuracy) : "n/a",
             earlier_eval, change, s.checkpoint);
}

// What a resumed run that has done all its steps says it does.
std::string AllDone(const char* kind, int64_t first_step, int64_t steps) {
  return first_step < steps
             ? std::string()
             : fmt::format(": all done (raise {}.steps to go on past step {})", kind, first_step);
}

int Fail(const char* kind, const Status& s) {
  fmt::print(stderr, "anvil {}: {}\n", kind, s.ToString());
  return 1;
}

// What both commands share: a stop request (Ctrl-C) ends the run on every
// rank; where this rank prints, evaluations and messages go past `progress`
// (the line a terminal redraws, made by the command's on_start).
rl::PostRunHooks RunHooks(const char* kind, bool prints,
                          const std::unique_ptr<train::Progress>& progress) {
  rl::PostRunHooks hooks{.stop_requested = [] { return train::StopRequested(); }};
  if (!prints) return hooks;
  hooks.on_eval = [kind, &progress](int64_t step, const rl::TaskEval& e) {
    Say(progress.get(), EvalLine(kind, step, e));
  };
  hooks.on_message = [&progress](const std::string& text) { Say(progress.get(), text); };
  return hooks;
}

// Under mpirun, whether the arguments and config (the same on every rank)
// hold, agreed over `ranks` (every rank of the job): a failure is said once
// and sets `agreed` (the job ends cleanly, no rank waits).
bool ConfigFailsOnEveryRank(comm::Group& ranks, const Status& read, const char* kind,
                            bool* agreed) {
  const Status all = comm::AgreeOnStatus(ranks, read, "reading the config");
  if (all.ok()) return false;
  SayAgreedFailure(ranks, all, fmt::format("anvil {}", kind));
  *agreed = true;
  return true;
}

// `trainers`: the ranks of an mpirun job, all training (null: this process
// alone); rank 0 prints. `agreed`: a failure every rank returned with.
int RunSftCommand(const PostOptions& o, comm::Group* trainers, bool* agreed) {
  rl::PostRunOptions run;
  run.trainers = trainers;
  const bool prints = trainers == nullptr || trainers->rank() == 0;
  auto config = LoadRun(o, "sft", run, prints);
  if (trainers != nullptr && ConfigFailsOnEveryRank(*trainers, config.status(), "sft", agreed)) {
    return 1;
  }
  if (!config.ok()) return Fail("sft", config.status());
  bool failed_in_setup = false;
  run.failed_in_setup = &failed_in_setup;
  train::InstallStopHandler();
  std::unique_ptr<train::Progress> progress;
  rl::SftHooks hooks{.run = RunHooks("sft", prints, progress)};
  if (prints) {
    hooks.on_start = [&](const rl::PostRunConfig& rc, int64_t first_step) {
      fmt::print("supervised fine-tuning for {} steps{}\n", rc.steps,
                 AllDone("sft", first_step, rc.steps));
      progress = std::make_unique<train::Progress>(first_step, rc.steps, rc.log_every);
    };
    hooks.on_step = [&](const train::StepMetrics& m) { progress->OnStep(m); };
  }
  auto summary = rl::RunSft(std::move(*config), run, hooks);
  if (progress) progress->Finish();
  if (!summary.ok() && failed_in_setup && trainers != nullptr) {
    SayAgreedFailure(*trainers, summary.status(), "anvil sft");
    *agreed = true;  // (every rank trains)
    return 1;
  }
  if (!summary.ok()) return Fail("sft", summary.status());
  if (prints) PrintSummary("sft", *summary, run.run_dir);
  return 0;
}

// Under mpirun every rank trains (data parallel, rl/trainer_ranks.h); a
// failed rank ends the whole job.
int RunSftInWorld(const PostOptions& o) {
  auto world = comm::InitWorld();
  if (!world.ok()) return Fail("sft", world.status());
  comm::Group& w = **world;
  bool agreed = false;
  const int rc = RunSftCommand(o, w.size() > 1 ? &w : nullptr, &agreed);
  if (rc != 0 && w.size() > 1 && !agreed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // for mpirun to forward it
    comm::AbortWorld(rc);
  }
  world->reset();
  comm::FinalizeWorld();
  return rc;
}

int RunRlCommand(const PostOptions& o, comm::Group& world, comm::Group* trainers, bool* agreed);

// The rank that draws the rollouts under this run's config (rl::RolloutRankOf;
// -1: every rank trains), read as every rank reads it.
Result<int> RolloutRankOf(const PostOptions& o, int world_size) {
  const std::string file =
      o.resume.empty() ? o.config : (std::filesystem::path(o.resume) / "config.toml").string();
  if (file.empty()) return -1;  // LoadRun names the problem
  ASSIGN_OR_RETURN(Config config, Config::FromFile(file));
  for (const std::string& s : o.sets) RETURN_IF_ERROR(config.Set(s));
  ASSIGN_OR_RETURN(const int64_t staleness, config.GetInt("rl.max_staleness", 0));
  return rl::RolloutRankOf(staleness, world_size);
}

// Under mpirun: every rank trains (rl.max_staleness = 0), or all but the last,
// which draws the rollouts (rl::ServeRollouts, rl.max_staleness = 1); trainer
// rank 0 prints and writes the run folder. A failed rank ends the whole job:
// the others may be waiting for it.
int RunRlInWorld(const PostOptions& o) {
  // The watchdog's limit (comm.timeout_s) is the run's from the rollout
  // setup on (rl::RemoteRollouts::Create).
  auto world = comm::InitWorld();
  if (!world.ok()) return Fail("rl", world.status());
  comm::Group& w = **world;
  int rc = 0;
  bool agreed = false;
  const Result<int> rollout_rank = w.size() > 1 ? RolloutRankOf(o, w.size()) : Result<int>(-1);
  if (w.size() > 1 && ConfigFailsOnEveryRank(w, rollout_rank.status(), "rl", &agreed)) {
    rc = 1;
  } else if (w.size() == 1) {
    rc = RunRlCommand(o, w, nullptr, &agreed);
  } else {
    const bool trains = w.rank() != *rollout_rank;
    const std::unique_ptr<comm::Group> trainers =
        w.Split(trains ? 0 : 1, w.rank(), trains ? "trainers" : "rollouts");
    if (trains) {
      rc = RunRlCommand(o, w, trainers.get(), &agreed);
    } else {
      // Ctrl-C: the trainer stops the run at a step's end, then this rank; the
      // handler keeps a forwarded SIGINT or SIGTERM from ending it first.
      train::InstallStopHandler();
      if (const Status s = rl::ServeRollouts(w, 0); !s.ok()) {
        rc = Fail("rl", s.WithContext(fmt::format("rank {}", w.rank())));
      }
    }
  }
  if (rc != 0 && w.size() > 1 && !agreed) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // for mpirun to forward it
    comm::AbortWorld(rc);
  }
  world->reset();
  comm::FinalizeWorld();
  return rc;
}

int RunRlCommand(const PostOptions& o, comm::Group& world, comm::Group* trainers, bool* agreed) {
  rl::PostRunOptions run;
  run.trainers = trainers;
  const bool prints = trainers == nullptr || trainers->rank() == 0;
  auto config = LoadRun(o, "rl", run, prints);
  // (agreed only where every rank trains: a rollout rank waits for the
  // trainers in rl::ServeRollouts)
  if (trainers != nullptr && trainers->size() == world.size() &&
      ConfigFailsOnEveryRank(*trainers, config.status(), "rl", agreed)) {
    return 1;
  }
  if (!config.ok()) return Fail("rl", config.status());
  bool failed_in_setup = false;
  run.failed_in_setup = &failed_in_setup;
  train::InstallStopHandler();
  int64_t log_every = 10, total_steps = 0;
  std::unique_ptr<train::Progress> progress;
  rl::RlHooks hooks{.run = RunHooks("rl", prints, progress)};
  if (prints) {
    hooks.on_start = [&](const rl::PostRunConfig& rc, int64_t first_step,
                         const std::string& algorithm) {
      log_every = rc.log_every;
      total_steps = rc.steps;
      fmt::print("{} for {} steps{}\n", algorithm, rc.steps, AllDone("rl", first_step, rc.steps));
      progress = std::make_unique<train::Progress>(first_step, rc.steps, rc.log_every);
    };
    hooks.on_step = [&](const rl::RlStepMetrics& m) {
      // Every step on a terminal, in place; in full every rl.log_every
      // steps and at the last.
      progress->DrawStep(m.step, RlStepShort(m));
      if (m.step % log_every == 0 || m.step == total_steps) {
        progress->Message(RlStepLines(m, total_steps));
      }
    };
  }
  auto summary = rl::RunRl(std::move(*config), run, hooks, &world);
  if (progress) progress->Finish();
  if (!summary.ok() && failed_in_setup && trainers != nullptr) {
    SayAgreedFailure(*trainers, summary.status(), "anvil rl");
    // (a rollout rank waits for the trainers: the job must be ended)
    *agreed = trainers->size() == world.size();
    return 1;
  }
  if (!summary.ok()) return Fail("rl", summary.status());
  if (prints) PrintSummary("rl", *summary, run.run_dir);
  return 0;
}

void AddPostOptions(CLI::App* cmd, PostOptions& o, const char* what) {
  cmd->add_option("--config", o.config, what);
  cmd->add_option("--set", o.sets, "Override a config key: key=value (repeatable)");
  cmd->add_option("--out", o.out, "Run folder (default: runs/<config name>)")
      ->check(NonEmptyPath());
  cmd->add_option("--resume", o.resume, "Continue the run in this folder from its latest checkpoint");
}

}  // namespace

void AddSftCommand(CLI::App& app) {
  auto o = std::make_shared<PostOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sft", "Supervised fine-tuning on a task's prompt/answer pairs (a starting policy for rl)");
  AddPostOptions(cmd, *o, "Run config (TOML: [model] or sft.init, [task], [sft], [optim])");
  cmd->callback([o] {
    if (const int rc = RunSftInWorld(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

void AddRlCommand(CLI::App& app) {
  auto o = std::make_shared<PostOptions>();
  CLI::App* cmd = app.add_subcommand(
      "rl",
      "GRPO/PPO post-training on a task with verifiable rewards, exactly on-policy (under "
      "mpirun every rank trains; with rl.max_staleness = 1 the last one draws the rollouts)");
  AddPostOptions(cmd, *o, "Run config (TOML: [task], [rl] with rl.init, [optim])");
  cmd->callback([o] {
    if (const int rc = RunRlInWorld(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
