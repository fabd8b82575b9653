// The settings `anvil sft` and `anvil rl` share, read from their section of
// the run config ("sft.*" or "rl.*"), with the task ("task.*") and the
// optimizer ("optim.*"). Absent keys keep the defaults below; unknown keys
// are errors (Config::CheckAllUsed).
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/model/config.h"
#include "anvil/optim/schedule.h"
#include "anvil/rl/tasks.h"

namespace anvil::rl {

struct PostRunConfig {
  std::string init;            // <section>.init: a checkpoint to start from ("": fresh, SFT only)
  int64_t steps = 1000;        // optimizer steps of the whole run
  int64_t seed = 1;            // weight init (fresh) and the rollouts' random streams
  model::Precision precision =
      model::Precision::kF32;  // <section>.precision: f32 | bf16 | fp8-block | mxfp8 | fp8-delayed
  int64_t eval_every = 100;    // held-out accuracy every N steps (and at the start and end)
  int64_t eval_problems = 500; // held-out problems per evaluation
  int64_t eval_batch = 64;     // sequences decoded together while evaluating
  int64_t max_new = 16;        // most tokens of an answer
  int64_t log_every = 10;      // a progress line every N steps
  int64_t checkpoint_every = 0;  // 0: at the end only
  int64_t keep_checkpoints = 2;  // newest N kept; 0 keeps all
  int64_t threads = 0;         // 0: ANVIL_THREADS or all cores
  double max_minutes = 0;      // stop (evaluate, checkpoint) after this wall time; 0: none
  // 1: AdamW's state (and a step's gradient sum) sharded over the trainer
  // ranks, each updating its shard of the weights, which are then gathered
  // (ZeRO-1, parallel/data_parallel.h); the same bits as 0. 2: the
  // policy's gradient too, reduced unit by unit (ZeRO-2; a separate
  // critic's stays whole). ZeRO-3 is refused: the rollouts read the weights.
  int64_t zero = 0;

  TaskConfig task;
  optim::OptimConfig optim;

  // `section`: "sft" or "rl".
  static Result<PostRunConfig> FromConfig(Config& config, const std::string& section);
};

}  // namespace anvil::rl
