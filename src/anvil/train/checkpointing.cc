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
  RETURN_IF_ERROR(WriteFileAtomic(w.Path("trainer_state.json"), s.dump(2) + "\n"));
  RETURN_IF_ERROR(WriteFileAtomic(w.Path("config.toml"), resolved_toml_));
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
  try {
    const nlohmann::json s = nlohmann::json::parse(text);
    step_ = s.at("step").get<int64_t>();
    tokens_seen_ = s.at("tokens_seen").get<int64_t>();
    const data::LoaderPosition pos{s.at("loader").at("epoch").get<uint64_t>(),
                                   s.at("loader").at("step").get<uint64_t>()};
    if (s.at("seed").get<int64_t>() != train_.seed) {
      return InvalidArgument(fmt::format("{}: seed {} differs from train.seed = {}", state_path,
                                         s.at("seed").get<int64_t>(), train_.seed));
    }
    const std::string want = fmt::format("{:016x}", train_shard_->checksum());
    if (s.at("train_shard_checksum").get<std::string>() != want) {
      return InvalidArgument(fmt::format(
          "{}: the checkpoint was trained on another train shard (checksum {}; {} has {})",
          state_path, s.at("train_shard_checksum").get<std::string>(), train_shard_->path(), want));
    }
    if (s.at("optimizer_step").get<int64_t>() != optimizer_->step()) {
      return DataLoss(fmt::format("{}: optimizer_step {} but optimizer.safetensors says {}",
                                  state_path, s.at("optimizer_step").get<int64_t>(),
                                  optimizer_->step()));
    }
    loader_->Seek(pos);
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: malformed: {}", state_path, e.what()));
  }
  last_saved_step_ = step_;
  return Status::Ok();
}

}  // namespace anvil::train
