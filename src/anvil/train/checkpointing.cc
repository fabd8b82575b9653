// The trainer's checkpoints: what a bitwise resume needs, written through
// io::CheckpointWriter (atomic, checksummed) and read back with checks that
// the run's data and seed are the ones the checkpoint was made with.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "anvil/core/file_util.h"
#include "anvil/io/checkpoint.h"
#include "anvil/io/flat_shards.h"
#include "anvil/model/checkpoint_weights.h"
#include "anvil/model/fp8_linear.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/profile/trace.h"
#include "anvil/train/trainer.h"
#include "anvil/train/trainer_state.h"

namespace anvil::train {

// Every rank of a ZeRO run writes its shard of the weights and of the
// optimizer state into the temporary folder rank 0 made, in parallel (no
// rank ever holds more than it trains with); one process or ZeRO-0, where
// every rank holds the same whole state, has rank 0 write it (the weights as
// Hugging Face model.safetensors). Rank 0 adds the trainer state, configs and
// the index (checkpoint_index.json), and commits (manifest, rename, `latest`)
// only after every rank's files are written and fsynced, so a failure
// anywhere leaves the previous checkpoint as `latest`.
Result<std::string> Trainer::SaveCheckpoint() {
  ANVIL_TRACE_ZONE("checkpoint");
  std::optional<io::CheckpointWriter> writer;
  Status begun = Status::Ok();
  if (root()) {
    auto w = io::CheckpointWriter::Begin(options_.run_dir, step_);
    if (w.ok()) {
      writer.emplace(std::move(*w));
    } else {
      begun = w.status();
    }
  }
  RETURN_IF_ERROR(Agree(std::move(begun), "starting a checkpoint"));
  const std::string temp = io::CheckpointTempDir(options_.run_dir, step_);
  Status written = Status::Ok();
  if (sharded()) {
    const optim::Shard& sh = optimizer_->shard();
    const model::LlamaParams& params = model_->params();
    // ZeRO-3's master shard, or this rank's part of the whole weights.
    const float* weights = gather_ ? gather_->master().data() : params.weights().data() + sh.begin;
    written = model::SaveWeightShard(temp, dp_->rank(), dp_size(), params.size(), sh.begin, sh.end,
                                     weights);
  }
  if (written.ok() && (sharded() || root())) {
    written = optimizer_->Save(temp + "/" + io::ShardFileName("optimizer", dp_->rank(),
                                                              sharded() ? dp_size() : 1));
  }
  if (written.ok() && root()) written = WriteSharedCheckpointFiles(temp);
  RETURN_IF_ERROR(Agree(std::move(written), "writing a checkpoint"));
  Status committed = Status::Ok();
  std::string dir = options_.run_dir + "/" + io::CheckpointDirName(step_);
  if (root()) {
    auto c = writer->Commit();
    committed = c.ok() ? io::PruneCheckpoints(options_.run_dir, static_cast<int>(train_.keep_checkpoints))
                       : c.status();
  }
  RETURN_IF_ERROR(Agree(std::move(committed), "committing a checkpoint"));
  last_saved_step_ = step_;
  return dir;
}

Status Trainer::WriteSharedCheckpointFiles(const std::string& temp) {
  if (sharded()) {  // the ranks wrote the weights; the config goes beside them
    RETURN_IF_ERROR(WriteFileAtomic(temp + "/config.json", model::HfConfigJson(model_config_)));
  } else {
    RETURN_IF_ERROR(model::SaveHfCheckpoint(temp, model_->params()));
  }
  const data::LoaderPosition pos = loaders_[0]->position();
  nlohmann::ordered_json s;
  s["format_version"] = 2;
  s["step"] = step_;
  s["tokens_seen"] = tokens_seen_;
  s["seed"] = train_.seed;
  s["global_batch_rows"] = train_.batch_size * train_.grad_accum * dp_size();
  s["loader"] = {{"epoch", pos.epoch}, {"step", pos.step}};
  s["optimizer_step"] = optimizer_->step();
  s["next_lr"] = schedule_->LrAt(step_);
  s["train_shard_checksum"] = fmt::format("{:016x}", train_shard_->checksum());
  s["val_shard_checksum"] = fmt::format("{:016x}", val_shard_->checksum());
  s["precision"] = model::PrecisionName(train_.precision);
  s["kernels"] = kernels();
  if (model::IsFp8(train_.precision)) {
    s["fp8_high_precision"] = train_.fp8_high_precision_name();
  }
  s["schedule_planned"] = schedule_planned_;
  if (last_val_loss_ && std::isfinite(*last_val_loss_)) {  // (JSON has no inf or NaN)
    s["last_eval"] = {{"step", last_eval_step_}, {"val_loss", *last_val_loss_}};
  }
  if (const model::Fp8DelayedScaling* delayed = model_->fp8_delayed()) {
    s["fp8_delayed"] = delayed->Save();
  }
  s["layout"] = {{"dp", dp_size()}, {"zero", plan_->zero()}, {"grad_accum", train_.grad_accum}};
  RETURN_IF_ERROR(WriteFileAtomic(temp + "/trainer_state.json", s.dump(2) + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(temp + "/checkpoint_index.json", CheckpointIndexJson()));
  return WriteFileAtomic(temp + "/config.toml", resolved_config());
}

std::string Trainer::kernels() const {
  const model::LlamaOptions& o = model_->options();
  return ctx_->BitsName(model::RunsBf16Gemms(o.precision, o.fp8));
}

// checkpoint_index.json: what a tool needs to read the checkpoint without
// anvil: the layout it was saved under, every tensor of the flat parameter
// layout (name, global shape, offset), and which file holds which range of
// the flat AdamW state.
std::string Trainer::CheckpointIndexJson() const {
  const model::LlamaParams& params = model_->params();
  nlohmann::ordered_json index;
  index["format"] = "anvil checkpoint index";
  index["version"] = 1;
  index["layout"] = {{"dp", dp_size()},
                     {"zero", plan_->zero()},
                     {"grad_accum", train_.grad_accum},
                     {"precision", model::PrecisionName(train_.precision)}};
  index["flat_size"] = params.size();
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const model::ParamInfo& p : params.params()) {
    tensors.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}});
  }
  index["tensors"] = std::move(tensors);
  // Which file holds which range of the flat layout (one file: all of it).
  auto files = [&](const std::string& prefix, std::vector<std::string> tensors) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    const int ranks = sharded() ? dp_size() : 1;
    int64_t begin = 0;
    for (int r = 0; r < ranks; ++r) {
      const int64_t end = sharded() ? begin + dp_->shard_counts()[r] : params.size();
      list.push_back({{"file", io::ShardFileName(prefix, r, ranks)},
                      {"tensors", tensors},
                      {"begin", begin},
                      {"end", end}});
      begin = end;
    }
    return list;
  };
  if (sharded()) {
    index["weights"] = {{"format", "flat f32 shards of the layout above (config.json beside them)"},
                        {"files", files(model::kWeightShardPrefix, {"weights"})}};
  } else {
    index["weights"] = {{"file", "model.safetensors"},
                        {"format", "Hugging Face Llama names, f32, whole (config.json beside it)"}};
  }
  index["optimizer"] = files("optimizer", {"m", "v"});
  return index.dump(2) + "\n";
}

namespace {

// Settings a resume keeps (besides those checked against trainer_state.json
// below): each step's rows, and the FP8 recipe as it ran (its keys on an FP8
// run, the amax ones on fp8-delayed, the recipe that keeps histories, the
// scale rule on mxfp8). A --set over one of them would go on as another run,
// not this one continued.
bool KeptOnResume(const std::string& key, model::Precision precision) {
  const bool fp8 = model::IsFp8(precision);
  const bool delayed = precision == model::Precision::kFp8Delayed;
  return key == "train.seq_len" ||
         (fp8 && (key == "train.fp8_decode" || key == "train.fp8_high_precision_layers" ||
                  key == "train.fp8_grad_format")) ||
         (delayed && (key == "train.fp8_amax_history" || key == "train.fp8_amax_reduction")) ||
         (precision == model::Precision::kMxfp8 && key == "train.fp8_mx_scale");
}

}  // namespace

Status Trainer::LoadCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(const io::CheckpointInfo info, io::OpenCheckpoint(path));
  const std::string saved_path = info.dir + "/config.toml";
  if (std::filesystem::exists(saved_path)) {
    ASSIGN_OR_RETURN(const Config saved, Config::FromFile(saved_path));
    const model::Precision precision = train_.precision;
    const std::vector<std::string> changed = config_.ChangedFrom(
        saved, [precision](const std::string& key) { return KeptOnResume(key, precision); });
    RETURN_IF_ERROR(RefuseResumeChanges(saved_path, changed, "start a new run"));
  }
  const std::string state_path = info.dir + "/trainer_state.json";
  ASSIGN_OR_RETURN(const std::string text, ReadFile(state_path));
  ASSIGN_OR_RETURN(const TrainerState s, ParseTrainerState(text, state_path));
  if (s.seed != train_.seed) {
    return InvalidArgument(fmt::format("{}: seed {} differs from train.seed = {}", state_path,
                                       s.seed, train_.seed));
  }
  // Same data and precision, or the resumed run is not the run continued:
  // another validation shard makes its val_loss incomparable, another
  // precision changes every step from here on.
  for (const data::TokenShard* shard : {train_shard_.get(), val_shard_.get()}) {
    const bool train = shard == train_shard_.get();
    const char* key = train ? "train_shard_checksum" : "val_shard_checksum";
    const std::string& got = train ? s.train_shard_checksum : s.val_shard_checksum;
    const std::string want = fmt::format("{:016x}", shard->checksum());
    if (got != want) {
      return InvalidArgument(fmt::format(
          "{}: the checkpoint was made with other data ({} {}; {} has {}); resume it with the "
          "data.dir it was trained on",
          state_path, key, got, shard->path(), want));
    }
  }
  const std::string precision = model::PrecisionName(train_.precision);
  if (s.precision != precision) {
    return InvalidArgument(fmt::format(
        "{}: the checkpoint was trained in {} precision, train.precision is now {}; a resume "
        "continues the run bitwise only in its own precision (set train.precision = \"{}\")",
        state_path, s.precision, precision, s.precision));
  }
  // Other kernels are allowed (a run may move to another machine), but its
  // steps from here are not an uninterrupted run's to the bit: say so.
  if (!s.kernels.empty() && s.kernels != kernels()) {
    resume_note_ = fmt::format(
        "the checkpoint's steps ran on the {} kernels, this session's on {}: from here the run "
        "differs in the last bits from an uninterrupted one (ANVIL_ISA and ANVIL_AMX as it ran "
        "continue it bitwise, where the CPU has them)",
        s.kernels, kernels());
  }
  // FP8: what the run keeps out of FP8 runs in one format throughout
  // (absent in checkpoints from before the choice: f32).
  if (model::IsFp8(train_.precision)) {
    const std::string kept = train_.fp8_high_precision_name();
    const std::string saved = s.fp8_high_precision.empty() ? "f32" : s.fp8_high_precision;
    if (saved != kept) {
      return InvalidArgument(fmt::format(
          "{}: the checkpoint ran the GEMMs it keeps out of FP8 in {}, train.fp8_high_precision "
          "is now {}; a resume continues the run bitwise only as it ran (set "
          "train.fp8_high_precision = \"{}\")",
          state_path, saved, kept, saved));
    }
  }
  if (train_.steps < s.step) {
    return InvalidArgument(fmt::format(
        "{}: the run is at step {}, past train.steps = {}; set train.steps = {} or more to go on",
        state_path, s.step, train_.steps, s.step));
  }
  // The data of a step depends on the global batch only (trainer.h), so a
  // checkpoint continues under any layout of the same global batch.
  const int64_t global_rows = train_.batch_size * train_.grad_accum * dp_size();
  if (s.format_version == 1 && global_rows != train_.batch_size) {
    return InvalidArgument(fmt::format(
        "{}: a checkpoint of the first format counts its data in micro-batches of one process; "
        "resume it with train.grad_accum = 1 on one process",
        state_path));
  }
  if (s.format_version >= 2 && s.global_batch_rows != global_rows) {
    return InvalidArgument(fmt::format(
        "{}: the checkpoint's global batch is {} rows, this run's is {} (train.batch_size {} x "
        "train.grad_accum {} x {} data-parallel ranks); a resume may change the layout, not the "
        "global batch",
        state_path, s.global_batch_rows, global_rows, train_.batch_size, train_.grad_accum,
        dp_size()));
  }
  if (s.loader.step >= loaders_[0]->steps_per_epoch()) {
    return InvalidArgument(fmt::format(
        "{}: loader step {} is past the end of an epoch of {} steps; the checkpoint was made "
        "with another batch shape or data",
        state_path, s.loader.step, loaders_[0]->steps_per_epoch()));
  }
  // Weights and optimizer state saved under any layout: this rank takes the
  // part it holds now (once the state above says the run continues).
  if (gather_) {  // ZeRO-3: this rank's shard of the weights
    const optim::Shard& sh = gather_->shard();
    RETURN_IF_ERROR(model::LoadCheckpointWeightRange(info.dir, model_config_, sh.begin, sh.end,
                                                     gather_->master().data()));
    gather_->Invalidate();
  } else {
    RETURN_IF_ERROR(model::LoadCheckpointWeights(info.dir, model_->params()));
    model_->RefreshBf16Weights(*ctx_);
  }
  RETURN_IF_ERROR(optimizer_->Load(io::ShardFiles(info.dir, "optimizer")));
  if (s.optimizer_step != optimizer_->step()) {
    return DataLoss(fmt::format("{}: optimizer_step {} but optimizer.safetensors says {}",
                                state_path, s.optimizer_step, optimizer_->step()));
  }
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  schedule_planned_ = s.schedule_planned;
  if (s.val_step >= 0) {
    last_eval_step_ = s.val_step;
    last_val_loss_ = s.val_loss;
  }
  if (model::Fp8DelayedScaling* delayed = model_->fp8_delayed()) {
    if (!delayed->Restore(s.fp8_delayed)) {
      return DataLoss(fmt::format(
          "{}: fp8_delayed holds {} values, not the {} tensors x (3 + train.fp8_amax_history = "
          "{}) of this model's delayed scaling",
          state_path, s.fp8_delayed.size(), delayed->tensors(), delayed->history_len()));
    }
  }
  for (auto& loader : loaders_) loader->Seek(s.loader);
  last_saved_step_ = step_;
  return Status::Ok();
}

}  // namespace anvil::train
