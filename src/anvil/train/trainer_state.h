// trainer_state.json: the counters a bitwise resume needs besides the weights
// and the optimizer, written by Trainer::SaveCheckpoint and read back by
// Trainer::LoadCheckpoint (checkpointing.cc). Parsed in a file of its own, so
// the checks on outside bytes can be fuzzed without a trainer (fuzz/).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "anvil/core/status.h"
#include "anvil/data/loader.h"

namespace anvil::train {

struct TrainerState {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  int64_t seed = 0;
  data::LoaderPosition loader;  // epoch <= 2^32 - 1 (the RNG's step field)
  int64_t optimizer_step = 0;
  std::string train_shard_checksum, val_shard_checksum;  // "{:016x}"
  std::string precision;
  bool schedule_planned = false;  // train.steps already fitted to train.time_budget_minutes
};

// Parses the JSON text; `path` names it in errors. Checks types and ranges
// (counts >= 0), not agreement with the run resuming it.
Result<TrainerState> ParseTrainerState(std::string_view text, const std::string& path);

}  // namespace anvil::train
