// The shared frame of post-training runs (post_run.h).
#include "anvil/rl/post_run.h"

#include <fmt/core.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

#include "anvil/core/check.h"
#include "anvil/core/file_util.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/io/checkpoint.h"
#include "anvil/io/flat_shards.h"
#include "anvil/model/fp8_linear.h"
#include "anvil/parallel/data_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::rl {
namespace {

struct SavedState {
  std::string kind;
  int64_t step = 0, seed = 0, optimizer_step = 0;
};

Result<SavedState> ReadState(const std::string& dir) {
  const std::string path = dir + "/state.json";
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  SavedState s;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    s.kind = j.at("kind").get<std::string>();
    s.step = j.at("step").get<int64_t>();
    s.seed = j.at("seed").get<int64_t>();
    s.optimizer_step = j.at("optimizer_step").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: malformed: {}", path, e.what()));
  }
  if (s.step < 0) return DataLoss(fmt::format("{}: step {} < 0", path, s.step));
  return s;
}

}  // namespace

Result<std::unique_ptr<PostRun>> PostRun::Create(Config config, const std::string& kind,
                                                 const PostRunOptions& options,
                                                 int64_t max_batch, const FreshPolicy& fresh) {
  std::unique_ptr<PostRun> run(new PostRun());
  RETURN_IF_ERROR(run->Init(std::move(config), kind, options, max_batch, fresh));
  return run;
}

Status PostRun::Init(Config config, const std::string& kind, const PostRunOptions& options,
                     int64_t max_batch, const FreshPolicy& fresh) {
  config_ = std::move(config);
  kind_ = kind;
  options_ = options;
  ASSIGN_OR_RETURN(run_, PostRunConfig::FromConfig(config_, kind));
  const PolicyOptions policy_options{
      .precision = run_.precision,
      .max_batch = max_batch,
      .threads = static_cast<int>(run_.threads),
      .fp8_settings = model::IsFp8(run_.precision) ? &config_ : nullptr,
      .whole_grads = zero_stage() < 2,
      .verify = options_.resume ? io::CheckpointRead::kAll : io::CheckpointRead::kModel};
  if (options_.resume) {
    ASSIGN_OR_RETURN(Policy p, LoadPolicy(options_.run_dir, policy_options, &loaded_from_));
    policy_ = std::make_unique<Policy>(std::move(p));
    ASSIGN_OR_RETURN(const SavedState s, ReadState(loaded_from_));
    ASSIGN_OR_RETURN(resumed_state_, ReadFile(loaded_from_ + "/state.json"));
    if (s.kind != kind_ || s.seed != run_.seed) {
      return InvalidArgument(fmt::format(
          "{}/state.json: a {} run with seed {}, not this {} run's seed {}", loaded_from_, s.kind,
          s.seed, kind_, run_.seed));
    }
    // AdamW's state from the checkpoint's files, whichever ranks wrote them.
    adamw_ = PolicyOptimizer(*policy_, run_.optim, OptimizerShard(policy_->llama->params().size()));
    const std::vector<std::string> files = io::ShardFiles(loaded_from_, "optimizer");
    if (files.empty()) {
      return DataLoss(fmt::format("{}: no optimizer.safetensors (nor its shards)", loaded_from_));
    }
    RETURN_IF_ERROR(adamw_->Load(files));
    if (adamw_->step() != s.optimizer_step) {
      return DataLoss(fmt::format("{}: optimizer step {}, state.json says {}", files[0],
                                  adamw_->step(), s.optimizer_step));
    }
    step_ = first_step_ = s.step;
    // Its checkpoint and latest held-out figures: a finished run resumed
    // neither evaluates nor saves again.
    last_saved_step_ = s.step;
    last_checkpoint_ = loaded_from_;
    RestoreLastEval();
    RETURN_IF_ERROR(CheckResumedRecipe());
  } else {
    if (!run_.init.empty()) {
      ASSIGN_OR_RETURN(Policy p, LoadPolicy(run_.init, policy_options, &loaded_from_));
      policy_ = std::make_unique<Policy>(std::move(p));
    } else if (fresh) {
      ASSIGN_OR_RETURN(Policy p, fresh(config_, run_, policy_options));
      policy_ = std::make_unique<Policy>(std::move(p));
    } else {
      return InvalidArgument(fmt::format(
          "{0}.init is not set: a {0} run starts from a checkpoint (for example an `anvil sft` "
          "run's folder)",
          kind_));
    }
    adamw_ = PolicyOptimizer(*policy_, run_.optim, OptimizerShard(policy_->llama->params().size()));
  }
  RecordFp8Recipe();
  schedule_ = std::make_unique<optim::LrSchedule>(run_.optim, run_.steps);
  return Status::Ok();
}

// The recipe that runs: the train.fp8_* keys the config gives
// (PolicyOptions::fp8_settings) over the loaded checkpoint's, or over the
// defaults. Recorded as values ("auto" resolved), so a resume, whose
// LoadPolicy reads the checkpoint's config.toml, runs it again.
void PostRun::RecordFp8Recipe() {
  const model::LlamaOptions& o = policy_->llama->options();
  if (!model::IsFp8(o.precision)) return;
  const auto name = [](bool bf16) { return std::string(bf16 ? "bf16" : "f32"); };
  config_.Resolve("train.fp8_decode", name(o.fp8.decode == kernels::Fp8Decode::kBf16));
  config_.Resolve("train.fp8_high_precision", name(o.fp8.high_precision_bf16));
  config_.Resolve("train.fp8_high_precision_layers", int64_t{o.fp8_high_precision_layers});
  config_.Resolve("train.fp8_grad_format",
                  std::string(o.fp8.grad == kernels::Fp8Format::kE5M2 ? "e5m2" : "e4m3"));
  config_.Resolve("train.fp8_amax_history", int64_t{o.fp8.amax_history});
  config_.Resolve("train.fp8_amax_reduction",
                  std::string(o.fp8.amax_most_recent ? "most_recent" : "max"));
  config_.Resolve(
      "train.fp8_mx_scale",
      std::string(o.fp8.mx_rule == kernels::BlockScale::kMxRoundUp ? "round_up" : "ocp"));
}

// A resume continues the run as it ran: its precision and FP8 recipe are the
// checkpoint's (config.toml), not what a --set over them asks for now.
Status PostRun::CheckResumedRecipe() const {
  const std::string path = loaded_from_ + "/config.toml";
  ASSIGN_OR_RETURN(Config saved, Config::FromFile(path));
  const std::string key = kind_ + ".precision";
  ASSIGN_OR_RETURN(const std::string precision, saved.GetString(key, "f32"));
  const std::string now = model::PrecisionName(run_.precision);
  if (precision != now) {
    return InvalidArgument(fmt::format(
        "{}: the run ran in {} precision, {} is now {}; a resume continues the run only in its "
        "own precision (set {} = \"{}\")",
        path, precision, key, now, key, precision));
  }
  if (!model::IsFp8(run_.precision)) return Status::Ok();
  ASSIGN_OR_RETURN(const model::ForwardOptions ran,
                   infer::Fp8SettingsOf(saved, {.precision = run_.precision}));
  const model::LlamaOptions& o = policy_->llama->options();
  // Values as TOML writes them (strings quoted).
  const auto quoted = [](const std::string& v) { return "\"" + v + "\""; };
  const auto bf16 = [&quoted](bool b) { return quoted(b ? "bf16" : "f32"); };
  const auto refuse = [&path](const char* name, const std::string& was, const std::string& is) {
    return InvalidArgument(fmt::format(
        "{}: the run's FP8 recipe has train.{} = {}, this resume asks for {}; a resume continues "
        "the run only with its own recipe (set train.{} = {}, or start a new run from the "
        "checkpoint)",
        path, name, was, is, name, was));
  };
  if (ran.fp8.decode != o.fp8.decode) {
    return refuse("fp8_decode", bf16(ran.fp8.decode == kernels::Fp8Decode::kBf16),
                  bf16(o.fp8.decode == kernels::Fp8Decode::kBf16));
  }
  if (ran.fp8.high_precision_bf16 != o.fp8.high_precision_bf16) {
    return refuse("fp8_high_precision", bf16(ran.fp8.high_precision_bf16),
                  bf16(o.fp8.high_precision_bf16));
  }
  if (ran.fp8_high_precision_layers != o.fp8_high_precision_layers) {
    return refuse("fp8_high_precision_layers", std::to_string(ran.fp8_high_precision_layers),
                  std::to_string(o.fp8_high_precision_layers));
  }
  if (ran.fp8.grad != o.fp8.grad) {
    const auto format = [&quoted](kernels::Fp8Format f) {
      return quoted(f == kernels::Fp8Format::kE5M2 ? "e5m2" : "e4m3");
    };
    return refuse("fp8_grad_format", format(ran.fp8.grad), format(o.fp8.grad));
  }
  if (run_.precision == model::Precision::kFp8Delayed) {  // the histories it keeps
    if (ran.fp8.amax_history != o.fp8.amax_history) {
      return refuse("fp8_amax_history", std::to_string(ran.fp8.amax_history),
                    std::to_string(o.fp8.amax_history));
    }
    if (ran.fp8.amax_most_recent != o.fp8.amax_most_recent) {
      const auto reduction = [&quoted](bool recent) {
        return quoted(recent ? "most_recent" : "max");
      };
      return refuse("fp8_amax_reduction", reduction(ran.fp8.amax_most_recent),
                    reduction(o.fp8.amax_most_recent));
    }
  }
  if (run_.precision == model::Precision::kMxfp8 && ran.fp8.mx_rule != o.fp8.mx_rule) {
    const auto rule = [&quoted](kernels::BlockScale r) {
      return quoted(r == kernels::BlockScale::kMxRoundUp ? "round_up" : "ocp");
    };
    return refuse("fp8_mx_scale", rule(ran.fp8.mx_rule), rule(o.fp8.mx_rule));
  }
  return Status::Ok();
}

// What a resume keeps besides the recipe (CheckResumedRecipe): the task, the
// tokenizer, whether there is a KL reference, the rows of a step (their
// layout, grad_accum and ranks, may change), and what rl's checkpoints hold
// state for: the algorithm (PPO's value head), the critic (a separate one's
// model) and the staleness (the rollout snapshot). A --set over one of them
// would go on as another run, not this one continued. ({kind}.init may
// change: a moved folder is named anew.)
Status PostRun::CheckResumeKeepsTheRun() const {
  if (run_.steps < step_) {
    return InvalidArgument(fmt::format(
        "{}: the run is at step {}, past {}.steps = {}; set {}.steps = {} or more to go on",
        loaded_from_, step_, kind_, run_.steps, kind_, step_));
  }
  const std::string path = loaded_from_ + "/config.toml";
  ASSIGN_OR_RETURN(const Config saved, Config::FromFile(path));
  const std::string kind = kind_;
  const auto kept = [&kind](const std::string& key) {
    return key.starts_with("task.") || key == "sft.tokenizer" || key == "sft.batch_size" ||
           key == "rl.group_size" || key == "rl.prompts_per_step" || key == "rl.reference" ||
           key == "rl.algorithm" || key == "rl.critic" || key == "rl.max_staleness";
  };
  return RefuseResumeChanges(path, config_.ChangedFrom(saved, kept),
                             fmt::format("start a new run from the checkpoint ({}.init)", kind_));
}

Status PostRun::Start() {
  // A mistyped key is named before anything about the run folder.
  RETURN_IF_ERROR(config_.CheckAllUsed());
  if (options_.resume) {
    RETURN_IF_ERROR(CheckResumeKeepsTheRun());
  } else if (std::filesystem::exists(options_.run_dir + "/" + io::kLatestFile)) {
    return InvalidArgument(
        fmt::format("{} already holds a run: continue it with --resume, or pass another --out",
                    options_.run_dir));
  }
  watch_.Reset();
  if (!writer()) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(options_.run_dir, ec);
  if (ec) {
    return IoError(fmt::format("{}: cannot create the run folder: {}", options_.run_dir,
                               ec.message()));
  }
  RETURN_IF_ERROR(WriteFileAtomic(options_.run_dir + "/config.toml", config_.ResolvedToml()));
  const std::string metrics = options_.run_dir + "/metrics.jsonl";
  if (!options_.resume) std::filesystem::remove(metrics, ec);  // a failed run's lines
  ASSIGN_OR_RETURN(metrics_, train::MetricsWriter::Open(metrics, options_.resume ? step_ : -1));
  return Status::Ok();
}

bool PostRun::Done(const PostRunHooks& hooks) {
  // (a stop every rank agreed on inside a step or an evaluation)
  if (early_stop_ == EarlyStop::kStopRequested) return true;
  enum Reason : int { kGoOn, kAllSteps, kStopRequested, kMaxMinutes };
  int reason = kGoOn;
  if (step_ >= run_.steps) {
    reason = kAllSteps;
  } else if (hooks.stop_requested && hooks.stop_requested()) {
    reason = kStopRequested;
  } else if (run_.max_minutes > 0 && watch_.Seconds() > run_.max_minutes * 60) {
    reason = kMaxMinutes;
  }
  if (options_.trainers != nullptr && options_.trainers->size() > 1) {
    options_.trainers->Broadcast(std::span<int>(&reason, 1), 0);
  }
  if (reason == kStopRequested) {
    if (hooks.on_message) hooks.on_message(fmt::format("stop requested at step {}", step_));
  } else if (reason == kMaxMinutes) {
    if (hooks.on_message) {
      hooks.on_message(fmt::format("{}.max_minutes = {} reached at step {} of {}", kind_,
                                   run_.max_minutes, step_, run_.steps));
    }
  }
  if (reason == kStopRequested) early_stop_ = EarlyStop::kStopRequested;
  if (reason == kMaxMinutes) early_stop_ = EarlyStop::kMaxMinutes;
  return reason != kGoOn;
}

void PostRun::StopInStep(const PostRunHooks& hooks, const std::string& what) {
  early_stop_ = EarlyStop::kStopRequested;
  if (hooks.on_message) {
    hooks.on_message(
        fmt::format("stop requested during {} of step {}: the step is dropped (a "
                    "resumed run takes it again)",
                    what, step_ + 1));
  }
}

Result<TaskEval> PostRun::Evaluate(const PostRunHooks& hooks) {
  Result<TaskEval> evaluated =
      EvaluateHeldOut(*policy_, run_.task, run_.eval_problems, run_.eval_batch, run_.max_new,
                      options_.trainers, hooks.stop_requested);
  if (evaluated.status().code() == StatusCode::kCancelled) {
    early_stop_ = EarlyStop::kStopRequested;
    eval_cut_at_ = step_;
    if (hooks.on_message) {
      hooks.on_message(fmt::format(
          "stop requested during the held-out evaluation at step {}: it is dropped (a resumed "
          "run evaluates again)",
          step_));
    }
    return evaluated;
  }
  ASSIGN_OR_RETURN(TaskEval e, std::move(evaluated));
  last_eval_ = e;
  last_eval_step_ = step_;
  if (!writer()) return e;
  nlohmann::ordered_json j;
  j["step"] = step_;
  j["heldout_accuracy"] = e.accuracy;
  j["heldout_well_formed"] = e.well_formed;
  j["heldout_tokens"] = e.mean_tokens;
  j["heldout_problems"] = e.problems;
  j["eval_seconds"] = e.seconds;
  metrics_->WriteJsonLine(j.dump());
  if (hooks.on_eval) hooks.on_eval(step_, e);
  return e;
}

Status PostRun::MakeUpEvaluation(const PostRunHooks& hooks) {
  const std::optional<double> cut_at = ResumedNumber("evaluation_cut_at");
  if (!cut_at || *cut_at != static_cast<double>(step_) || step_ == 0 || step_ >= run_.steps) {
    return Status::Ok();
  }
  const Result<TaskEval> evaluated = Evaluate(hooks);
  if (evaluated.status().code() == StatusCode::kCancelled) return Status::Ok();  // cut again
  RETURN_IF_ERROR(evaluated.status());
  return Save().status();
}

Status PostRun::AfterStep(const PostRunHooks& hooks) {
  if (step_ >= run_.steps) return Status::Ok();
  if (run_.eval_every > 0 && step_ % run_.eval_every == 0) {
    const Result<TaskEval> evaluated = Evaluate(hooks);
    if (evaluated.status().code() == StatusCode::kCancelled) return Status::Ok();
    RETURN_IF_ERROR(evaluated.status());
  }
  if (run_.checkpoint_every > 0 && step_ % run_.checkpoint_every == 0) {
    RETURN_IF_ERROR(Save().status());
  }
  return Status::Ok();
}

Result<PostRunSummary> PostRun::Finish(const PostRunHooks& hooks) {
  // A run asked to stop ends without the held-out pass (as `anvil train`
  // does): the person who asked waits for the checkpoint alone.
  bool evaluated = false;
  if (last_eval_step_ != step_ && early_stop_ != EarlyStop::kStopRequested) {
    const Result<TaskEval> e = Evaluate(hooks);
    if (e.status().code() != StatusCode::kCancelled) {
      RETURN_IF_ERROR(e.status());
      evaluated = true;
    }
  }
  if (last_saved_step_ != step_ || evaluated) RETURN_IF_ERROR(Save().status());
  PostRunSummary s;
  s.first_step = first_step_;
  s.steps_done = step_;
  s.last_eval = last_eval_;
  s.last_eval_step = last_eval_ ? last_eval_step_ : -1;
  s.checkpoint = last_checkpoint_;
  s.stopped_early = early_stop_ != EarlyStop::kNo;
  s.seconds = watch_.Seconds();
  return s;
}

void PostRun::SetTrainerSlots(int ranks, int grad_accum, const std::string& what,
                              const PostRunHooks& hooks) {
  trainer_slots_ = ranks * grad_accum;
  if (!hooks.on_message) return;
  if (sharded()) {
    constexpr double kMiB = 1 << 20;
    const double shard = static_cast<double>(adamw_->shard().size()) / kMiB;
    const double whole = static_cast<double>(adamw_->size()) / kMiB;
    const std::string grads =
        run_.zero >= 2 ? fmt::format(
                             " and of the gradient ({:.1f} MiB here of {:.1f} MiB, plus two "
                             "buffers of the largest unit's)",
                             4 * shard, 4 * whole)
                       : "";
    hooks.on_message(fmt::format(
        "{}.zero = {}: each of the {} trainer ranks holds its shard of AdamW's state ({:.1f} MiB "
        "here of {:.1f} MiB){} and updates its part of the weights",
        kind_, run_.zero, ranks, 8 * shard, 8 * whole, grads));
  }
  if (trainer_slots_ > 1) {
    hooks.on_message(
        fmt::format("{} trainer rank{}, {} micro-batch{} each: a{} {}'s gradient folds {} slots",
                    ranks, ranks == 1 ? "" : "s", grad_accum, grad_accum == 1 ? "" : "es",
                    what == "update" ? "n" : "", what, trainer_slots_));
  }
  // Runs from before the count was recorded had one slot.
  const double saved = ResumedNumber("trainer_slots").value_or(1);
  if (options_.resume && saved != trainer_slots_) {
    hooks.on_message(
        fmt::format("note: the run's {}s were folded over {} slots, now {} (trainer ranks x "
                    "{}.grad_accum): its bits part from an uninterrupted run's from here",
                    what, saved, trainer_slots_, kind_));
  }
}

std::optional<double> PostRun::ResumedNumber(const std::string& key) const {
  if (resumed_state_.empty()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(resumed_state_, nullptr, /*exceptions=*/false);
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return std::nullopt;
  return j[key].get<double>();
}

void PostRun::RestoreLastEval() {
  const nlohmann::json j = nlohmann::json::parse(resumed_state_, nullptr, /*exceptions=*/false);
  if (!j.is_object() || !j.contains("last_eval")) return;  // none yet, or an older run
  const nlohmann::json& e = j["last_eval"];
  const auto number = [&](const char* key) {
    return e.is_object() && e.contains(key) && e[key].is_number();
  };
  if (!number("step") || !number("problems") || !number("accuracy") || !number("well_formed") ||
      !number("mean_tokens")) {
    return;
  }
  last_eval_step_ = e["step"].get<int64_t>();
  last_eval_ = TaskEval{.problems = e["problems"].get<int64_t>(),
                        .accuracy = e["accuracy"].get<double>(),
                        .well_formed = e["well_formed"].get<double>(),
                        .mean_tokens = e["mean_tokens"].get<double>()};
}

std::optional<std::string> PostRun::ResumedString(const std::string& key) const {
  if (resumed_state_.empty()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(resumed_state_, nullptr, /*exceptions=*/false);
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return std::nullopt;
  return j[key].get<std::string>();
}

optim::Shard PostRun::OptimizerShard(int64_t size) const {
  if (!sharded()) return {0, size};
  return parallel::ShardOf(parallel::ZeroShardCounts(size, options_.trainers->size()),
                           options_.trainers->rank());
}

Status PostRun::Agree(Status status, const char* what) {
  if (!sharded()) return status;
  const int failed = options_.trainers->AllReduceValue<int>(status.ok() ? 0 : 1);
  if (!status.ok() || failed == 0) return status;
  return Aborted(fmt::format("{}: another trainer rank failed (its error is on its output)", what));
}

Result<std::string> PostRun::Save() {
  if (!writer() && !sharded()) return std::string();  // the writer writes the whole state
  ANVIL_TRACE_ZONE("checkpoint");
  // The writer makes the temporary folder; sharded, every rank writes its
  // files into it, and the writer commits (checksums, renames, `latest`)
  // only once all have, so a failure anywhere keeps the previous `latest`.
  std::optional<io::CheckpointWriter> checkpoint;
  Status status = Status::Ok();
  if (writer()) {
    Result<io::CheckpointWriter> begun = io::CheckpointWriter::Begin(options_.run_dir, step_);
    if (begun.ok()) {
      checkpoint.emplace(std::move(*begun));
    } else {
      status = begun.status();
    }
  }
  RETURN_IF_ERROR(Agree(std::move(status), "starting a checkpoint"));
  const std::string temp = io::CheckpointTempDir(options_.run_dir, step_);
  const int rank = sharded() ? options_.trainers->rank() : 0;
  const int ranks = sharded() ? options_.trainers->size() : 1;
  status = adamw_->Save(temp + "/" + io::ShardFileName("optimizer", rank, ranks));
  for (const RankFiles& files : save_ranks_) {
    if (status.ok()) status = files(temp, rank, ranks);
  }
  if (status.ok() && writer()) {
    std::string state = fmt::format(
        "{{\n  \"kind\": \"{}\",\n  \"step\": {},\n  \"seed\": {},\n  \"optimizer_step\": {},\n"
        "  \"task\": \"{}\"",
        kind_, step_, run_.seed, adamw_->step(), TaskName(run_.task.task));
    if (!run_.init.empty()) {
      state += fmt::format(",\n  \"init\": {}", nlohmann::json(run_.init).dump());
    }
    state += fmt::format(",\n  \"trainer_slots\": {}", trainer_slots_);
    if (const model::Fp8DelayedScaling* delayed = policy_->llama->fp8_delayed()) {
      // The amax histories and scales (infer::RestoreDelayedScales reads them).
      state += ",\n  \"fp8_delayed\": " + nlohmann::json(delayed->Save()).dump();
    }
    if (last_eval_) {
      const TaskEval& e = *last_eval_;
      state += fmt::format(",\n  \"last_eval\": {}", nlohmann::json{{"step", last_eval_step_},
                                                                    {"problems", e.problems},
                                                                    {"accuracy", e.accuracy},
                                                                    {"well_formed", e.well_formed},
                                                                    {"mean_tokens", e.mean_tokens}}
                                                         .dump());
    }
    if (eval_cut_at_ == step_) {
      state += fmt::format(",\n  \"evaluation_cut_at\": {}", step_);  // MakeUpEvaluation
    }
    if (!extra_state_.empty()) state += ",\n  " + extra_state_;
    if (evaluation_state_ && last_eval_ && last_eval_step_ == step_) {
      state += ",\n  " + evaluation_state_(*last_eval_);
    }
    state += "\n}\n";
    status = WritePolicyFiles(temp, *policy_, state, config_.ResolvedToml());
    for (const ExtraFiles& files : save_also_) {
      if (status.ok()) status = files(temp);
    }
  }
  RETURN_IF_ERROR(Agree(std::move(status), "writing a checkpoint"));
  status = Status::Ok();
  if (writer()) {
    // Every rank's shard is there before the manifest lists the folder.
    for (int r = 0; r < ranks && status.ok(); ++r) {
      const std::string shard = temp + "/" + io::ShardFileName("optimizer", r, ranks);
      if (!std::filesystem::exists(shard)) {
        status =
            DataLoss(fmt::format("{}: trainer rank {}'s optimizer shard is missing (is {} "
                                 "one folder for every rank?)",
                                 shard, r, options_.run_dir));
      }
    }
  }
  if (writer() && status.ok()) {
    Result<std::string> committed = checkpoint->Commit();
    status = committed.ok()
                 ? io::PruneCheckpoints(options_.run_dir, static_cast<int>(run_.keep_checkpoints))
                 : committed.status();
    if (committed.ok()) last_checkpoint_ = *committed;
  }
  RETURN_IF_ERROR(Agree(std::move(status), "committing a checkpoint"));
  last_saved_step_ = step_;
  return last_checkpoint_;
}

}  // namespace anvil::rl
