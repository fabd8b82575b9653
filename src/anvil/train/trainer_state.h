// trainer_state.json: the counters a bitwise resume needs besides the weights
// and the optimizer, written by Trainer::SaveCheckpoint and read back by
// Trainer::LoadCheckpoint (checkpointing.cc). Parsed in a file of its own, so
// the checks on outside bytes can be fuzzed without a trainer (fuzz/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/data/loader.h"

namespace anvil::train {

struct TrainerState {
  // 1: one process, the loader position in micro-batches. 2: the loader
  // position in global steps of global_batch_rows rows (any layout).
  int64_t format_version = 1;
  int64_t global_batch_rows = 0;  // format 2: train.batch_size x grad_accum x dp
  int64_t step = 0;
  int64_t tokens_seen = 0;
  int64_t seed = 0;
  data::LoaderPosition loader;  // epoch <= 2^32 - 1 (the RNG's step field)
  int64_t optimizer_step = 0;
  std::string train_shard_checksum, val_shard_checksum;  // "{:016x}"
  std::string precision;
  // The kernels its steps ran on (Trainer::kernels; empty in checkpoints
  // made before it was recorded).
  std::string kernels;
  // FP8 precisions: "bf16" or "f32", what ran the GEMMs kept out of FP8
  // (empty in checkpoints made before it was recorded: f32).
  std::string fp8_high_precision;
  bool schedule_planned = false;  // train.steps already fitted to train.time_budget_minutes
  // The run's latest validation (absent before its first, and in checkpoints
  // made before it was recorded): a resume at that step does not repeat it.
  int64_t val_step = -1;
  double val_loss = 0;
  // fp8-delayed: the amax histories and scales (model::Fp8DelayedScaling::Save).
  std::vector<double> fp8_delayed;
};

// Parses the JSON text; `path` names it in errors. Checks types and ranges
// (counts >= 0), not agreement with the run resuming it.
Result<TrainerState> ParseTrainerState(std::string_view text, const std::string& path);

}  // namespace anvil::train
