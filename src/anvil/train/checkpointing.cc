// The trainer's checkpoints: what a bitwise resume needs, written through
// io::CheckpointWriter (atomic, checksummed) and read back with checks that
// the run's data and seed are the ones the checkpoint was made with.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "anvil/core/file_util.h"
#include "anvil/io/checkpoint.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/profile/trace.h"
#include "anvil/train/trainer.h"
#include "anvil/train/trainer_state.h"

namespace anvil::train {

Result<std::string> Trainer::SaveCheckpoint() {
  ANVIL_TRACE_ZONE("checkpoint");
  ASSIGN_OR_RETURN(io::CheckpointWriter w, io::CheckpointWriter::Begin(options_.run_dir, step_));
  RETURN_IF_ERROR(model::SaveHfCheckpoint(w.temp_dir(), model_->params()));
  RETURN_IF_ERROR(optimizer_->Save(w.Path("optimizer.safetensors")));
  const data::LoaderPosition pos = loader_->position();
  nlohmann::ordered_json s;
  s["format_version"] = 1;
  s["step"] = step_;
  s["tokens_seen"] = tokens_seen_;
  s["seed"] = train_.seed;
  s["loader"] = {{"epoch", pos.epoch}, {"step", pos.step}};
  s["optimizer_step"] = optimizer_->step();
  s["next_lr"] = schedule_->LrAt(step_);
  s["train_shard_checksum"] = fmt::format("{:016x}", train_shard_->checksum());
  s["val_shard_checksum"] = fmt::format("{:016x}", val_shard_->checksum());
  s["precision"] = model::PrecisionName(train_.precision);
  s["schedule_planned"] = schedule_planned_;
  RETURN_IF_ERROR(WriteFileAtomic(w.Path("trainer_state.json"), s.dump(2) + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(w.Path("config.toml"), resolved_config()));
  ASSIGN_OR_RETURN(std::string dir, w.Commit());
  RETURN_IF_ERROR(io::PruneCheckpoints(options_.run_dir, static_cast<int>(train_.keep_checkpoints)));
  last_saved_step_ = step_;
  return dir;
}

Status Trainer::LoadCheckpoint(const std::string& path) {
  ASSIGN_OR_RETURN(const io::CheckpointInfo info, io::OpenCheckpoint(path));
  RETURN_IF_ERROR(model::LoadHfCheckpoint(info.dir, model_->params()));
  model_->RefreshBf16Weights(*ctx_);
  RETURN_IF_ERROR(optimizer_->Load(info.dir + "/optimizer.safetensors"));
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
  if (s.optimizer_step != optimizer_->step()) {
    return DataLoss(fmt::format("{}: optimizer_step {} but optimizer.safetensors says {}",
                                state_path, s.optimizer_step, optimizer_->step()));
  }
  if (s.loader.step >= loader_->steps_per_epoch()) {
    return InvalidArgument(fmt::format(
        "{}: loader step {} is past the end of an epoch of {} steps; the checkpoint was made "
        "with another batch shape or data",
        state_path, s.loader.step, loader_->steps_per_epoch()));
  }
  step_ = s.step;
  tokens_seen_ = s.tokens_seen;
  schedule_planned_ = s.schedule_planned;
  loader_->Seek(s.loader);
  last_saved_step_ = step_;
  return Status::Ok();
}

}  // namespace anvil::train
