// What `anvil sft` and `anvil rl` runs share: the run folder (config.toml,
// metrics.jsonl, checkpoints step_<N>/ with a `latest`), the policy and its
// AdamW, the learning-rate schedule, held-out evaluation, checkpoints with
// state.json, bitwise resume and the stop conditions. The step itself is
// the caller's (sft.cc, rl_run.cc).
//
// A new run starts from `<section>.init` (a checkpoint) or, where the
// section allows it, from fresh weights; a resumed one from the run folder's
// latest checkpoint, whose state.json must be of the same kind and seed. A
// step's data and random streams are functions of (seed, step), so the
// weights, the optimizer state and the step are all a resume needs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/core/clock.h"
#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/optim/adamw.h"
#include "anvil/optim/schedule.h"
#include "anvil/rl/policy.h"
#include "anvil/rl/run_config.h"
#include "anvil/rl/task_eval.h"
#include "anvil/train/metrics.h"

namespace anvil::rl {

struct PostRunOptions {
  std::string run_dir;
  bool resume = false;  // continue from run_dir's latest checkpoint (config from its config.toml)
  // The ranks that train together (rl/trainer_ranks.h; null: this process
  // alone). Rank 0 writes the run folder and decides when the run stops;
  // the others load the same checkpoints and follow (under <kind>.zero >= 1
  // each also writes its optimizer shard into them). All of them share the
  // held-out evaluation.
  comm::Group* trainers = nullptr;
  // Set when the run fails in its setup (the config, the policy and its
  // checkpoint, the run folder: PostRun::Start and what comes before it in
  // RunSft / RunRl; not the files an RL run loads after it, such as the
  // reference or a critic): the trainer ranks agree on that
  // outcome (rl/shared_outcome.h), so every one of them returns, each with
  // its own failure or Aborted for another's.
  bool* failed_in_setup = nullptr;
};

// What a run reports as it goes (the command prints them).
struct PostRunHooks {
  std::function<void(int64_t step, const TaskEval& eval)> on_eval = nullptr;
  std::function<void(const std::string& message)> on_message = nullptr;
  // Polled between steps, and by the reward-scoring threads during a step
  // (rl_run.cc): must be safe to call from any thread.
  std::function<bool()> stop_requested = nullptr;
};

// What a finished (or stopped) run did.
struct PostRunSummary {
  int64_t first_step = 0, steps_done = 0;
  // Held-out accuracy at step 0 and at the last evaluation: the end's, or
  // an earlier one for a run stopped by a stop request.
  std::optional<TaskEval> first_eval, last_eval;
  int64_t last_eval_step = -1;  // last_eval's step: steps_done, or before it for a stopped run
  std::string checkpoint;                         // the last one written
  bool stopped_early = false;                     // a stop request or max_minutes
  double seconds = 0;
};

class PostRun {
 public:
  // `kind`: "sft" or "rl" (the config section and state.json's kind).
  // `fresh`: builds the policy of a new run without `<kind>.init` (null: init
  // is required). `max_batch`: rows a training step holds.
  using FreshPolicy = std::function<Result<Policy>(Config& config, const PostRunConfig& run,
                                                   const PolicyOptions& options)>;
  static Result<std::unique_ptr<PostRun>> Create(Config config, const std::string& kind,
                                                 const PostRunOptions& options,
                                                 int64_t max_batch, const FreshPolicy& fresh);
  // An FP8 policy's recipe into the run's config, so its config.toml and
  // checkpoints carry it (what LoadPolicy reads on resume, and `anvil
  // generate`).
  void RecordFp8Recipe();

  const PostRunConfig& config() const { return run_; }
  // The run config: sections beyond the shared ones are read by the caller
  // before Start() (which checks that every key was used).
  Config& raw_config() { return config_; }
  Policy& policy() { return *policy_; }
  optim::AdamW& adamw() { return *adamw_; }
  const std::string& run_dir() const { return options_.run_dir; }
  // Whether this process writes the run folder and commits checkpoints
  // (trainer rank 0; sharded, every rank writes its shard files).
  bool writer() const { return options_.trainers == nullptr || options_.trainers->rank() == 0; }
  int64_t step() const { return step_; }  // steps done
  int64_t first_step() const { return first_step_; }
  // The checkpoint the policy was loaded from: rl.init / sft.init for a new
  // run, the run's own latest for a resumed one (empty: fresh weights).
  const std::string& loaded_from() const { return loaded_from_; }

  // Checks that every key was read; the writer writes config.toml and opens
  // metrics.jsonl (a new run's starts empty).
  Status Start();
  double LrAt(int64_t step) const { return schedule_->LrAt(step); }
  void StepDone() { ++step_; }
  // Whether the loop should end before the next step: steps done, a stop
  // request or <kind>.max_minutes (said through on_message once); the
  // writer's decision on every trainer rank.
  bool Done(const PostRunHooks& hooks);
  // A stop request met inside a step, during `what` (said through
  // on_message): the step is dropped, neither trained nor recorded, and
  // Finish checkpoints the run as it stood before it.
  void StopInStep(const PostRunHooks& hooks, const std::string& what);
  // Held-out accuracy now, every trainer rank decoding its share of the
  // problems (all of them call it); the writer records it in metrics.jsonl
  // and passes it to on_eval. A stop request cuts it on every rank
  // (kCancelled, said through on_message): nothing is recorded, and the run
  // stops (Done) as after StopInStep.
  Result<TaskEval> Evaluate(const PostRunHooks& hooks);
  // A resumed run whose evaluation at this step a stop cut (its checkpoint
  // says so) makes it up and writes this step's checkpoint again with it,
  // so metrics.jsonl and the checkpoints read as an uninterrupted run's.
  // (Not at step 0, which an RL run measures itself, nor at the last step,
  // which Finish evaluates.)
  Status MakeUpEvaluation(const PostRunHooks& hooks);
  // Whether a stop request was met inside a step or an evaluation (agreed
  // over the trainer ranks): the loop ends.
  bool stop_agreed() const { return early_stop_ == EarlyStop::kStopRequested; }
  // After a step: the evaluation and the checkpoint <kind>.eval_every and
  // <kind>.checkpoint_every ask for (none at the last step: Finish does
  // them), on every trainer rank. (A cut evaluation leaves the checkpoint
  // to Finish.)
  Status AfterStep(const PostRunHooks& hooks);
  // The latest evaluation and the step it was made at (-1: none yet).
  const std::optional<TaskEval>& last_eval() const { return last_eval_; }
  int64_t last_eval_step() const { return last_eval_step_; }
  // The end of the loop: the final evaluation and checkpoint, unless this
  // step already had them (a run asked to stop skips the evaluation; a
  // checkpoint of this step written before its evaluation is written again).
  Result<PostRunSummary> Finish(const PostRunHooks& hooks);
  // A checkpoint of the current step (its state.json with SetExtraState's
  // and SetEvaluationState's fields). Every trainer rank calls it: sharded,
  // each writes its shard into the writer's temporary folder, and the writer
  // commits once all have; else the writer writes all (the others return an
  // empty folder name).
  Result<std::string> Save();
  // The trainer ranks and micro-batches each (rl/trainer_ranks.h) a `what`
  // ("step", "update") is folded over: said through on_message when more
  // than one, recorded in every checkpoint, and a resume on another count
  // is said to part from the uninterrupted run's bits.
  void SetTrainerSlots(int ranks, int grad_accum, const std::string& what,
                       const PostRunHooks& hooks);
  // More state.json fields in every checkpoint from now on (a JSON object's
  // members, without braces), e.g. the held-out accuracy at the start.
  void SetExtraState(std::string fields) { extra_state_ = std::move(fields); }
  // More state.json fields from the evaluation at a checkpoint's step, in
  // every checkpoint whose step has one (whichever path wrote it: a periodic
  // save, a made-up evaluation's, the final one), e.g. its accuracy.
  void SetEvaluationState(std::function<std::string(const TaskEval&)> fields) {
    evaluation_state_ = std::move(fields);
  }
  // A number field of the state.json a resumed run loaded (none for a new
  // run, or when it has no such field).
  std::optional<double> ResumedNumber(const std::string& key) const;
  // The same for a string field.
  std::optional<std::string> ResumedString(const std::string& key) const;
  // Every checkpoint from now on also holds `extra`'s files (a caller's
  // state beyond the policy's: PPO's value head, a rollout snapshot),
  // written by the writer.
  void SaveAlso(ExtraFiles extra) { save_also_.push_back(std::move(extra)); }
  // Files each trainer rank writes into every checkpoint from now on (a
  // sharded optimizer's state: io::ShardFileName(prefix, rank, ranks)).
  // Under <kind>.zero >= 1 with several trainer ranks every rank calls it
  // with its rank and their count; otherwise the writer alone, with 0 of 1.
  using RankFiles = std::function<Status(const std::string& dir, int rank, int ranks)>;
  void SaveFromEveryRank(RankFiles files) { save_ranks_.push_back(std::move(files)); }
  // This trainer rank's part of a `size`-element parameter layout (an
  // optimizer's shard): under <kind>.zero >= 1 its ZeRO-1 shard
  // (parallel::ZeroShardCounts), else the whole layout.
  optim::Shard OptimizerShard(int64_t size) const;
  // Whether AdamW's state is sharded over several trainer ranks.
  bool sharded() const {
    return run_.zero >= 1 && options_.trainers != nullptr && options_.trainers->size() > 1;
  }
  // The ZeRO stage the trainer ranks run (TrainerRanks, and so whether the
  // policy holds its whole gradient): <kind>.zero, or 0 on one rank
  // (nothing to shard; ZeRO-2 would only add its unit slots).
  int zero_stage() const { return sharded() ? static_cast<int>(run_.zero) : 0; }
  train::MetricsWriter& metrics() { return *metrics_; }
  double seconds() const { return watch_.Seconds(); }

 private:
  PostRun() = default;
  Status Init(Config config, const std::string& kind, const PostRunOptions& options,
              int64_t max_batch, const FreshPolicy& fresh);
  // A resume's settings against the checkpoint's config.toml: the task,
  // starting point, tokenizer and step rows; the precision and FP8 recipe.
  Status CheckResumeKeepsTheRun() const;
  Status CheckResumedRecipe() const;
  // The latest held-out evaluation of a resumed run, from its state.json.
  void RestoreLastEval();
  // `status` if every rank writing a sharded checkpoint succeeded, else an
  // error on all (one rank's failure ends the save on every rank).
  Status Agree(Status status, const char* what);

  Config config_;
  std::string kind_;
  PostRunOptions options_;
  PostRunConfig run_;
  std::unique_ptr<Policy> policy_;
  std::unique_ptr<optim::AdamW> adamw_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<train::MetricsWriter> metrics_;
  std::string loaded_from_;
  int64_t step_ = 0, first_step_ = 0;
  std::optional<TaskEval> last_eval_;
  int64_t last_eval_step_ = -1, last_saved_step_ = -1;
  std::string last_checkpoint_;
  std::vector<ExtraFiles> save_also_;
  std::vector<RankFiles> save_ranks_;
  std::string extra_state_;
  std::function<std::string(const TaskEval&)> evaluation_state_;
  int trainer_slots_ = 1;
  std::string resumed_state_;  // state.json's text of a resumed run
  // Why the run stops before its last step (a stop request skips the end's
  // held-out pass; max_minutes does not).
  enum class EarlyStop { kNo, kStopRequested, kMaxMinutes };
  EarlyStop early_stop_ = EarlyStop::kNo;
  int64_t eval_cut_at_ = -1;  // the step whose evaluation a stop cut (its checkpoint says so)
  Stopwatch watch_;
};

}  // namespace anvil::rl
