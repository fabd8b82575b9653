// The trainer's settings: "train.*" (the step loop, evaluation, checkpoints)
// and "data.*" (where the token shards are and how batches are cut), read from
// a run Config with defaults and validated once.
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/data/loader.h"
#include "anvil/model/config.h"

namespace anvil::train {

struct TrainConfig {
  // data.*
  std::string data_dir = "data/brown";  // train.bin, val.bin, tokenizer.json, meta.json
  data::BatchMode mode = data::BatchMode::kWindows;  // data.mode: "windows" | "packed"
  bool shuffle = true;                                // data.shuffle

  // train.*
  int64_t steps = 1000;         // optimizer steps of the whole run
  int64_t batch_size = 8;       // B: rows per micro-batch
  int64_t seq_len = 256;        // T
  int64_t grad_accum = 1;       // micro-batches per step
  int64_t seed = 1234;          // weight init and data order
  model::Precision precision = model::Precision::kF32;
  model::Recompute recompute = model::Recompute::kNone;
  int64_t threads = 0;          // 0: ANVIL_THREADS or all cores
  int64_t eval_every = 100;     // validation every N steps (and at the end); 0: end only
  int64_t eval_batches = 8;     // validation batches (the first ones, in order)
  int64_t checkpoint_every = 0;  // 0: at the end only
  int64_t keep_checkpoints = 3;  // newest N kept; 0 keeps all
  int64_t log_every = 10;        // plain progress lines when not on a terminal
  double max_minutes = 0;        // stop (eval + checkpoint) after this wall time; 0: none
  int64_t trace_steps = 3;       // steps traced with --trace (after the first)

  // Reads the keys (absent ones keep the defaults above) and validates.
  static Result<TrainConfig> FromConfig(Config& config);
  Status Validate() const;

  int64_t tokens_per_step() const { return batch_size * seq_len * grad_accum; }
};

}  // namespace anvil::train
