// Validation loss and perplexity of a checkpoint through the KV-cache
// decoder (`anvil eval`): the first `windows` windows of the run's
// validation shard (<data.dir>/val.bin, cut as the trainer cuts them: T + 1
// tokens from k * T, T = train.seq_len), each prefilled as one sequence, the
// mean next-token cross-entropy over their T targets. The model runs in a
// precision (f32, bf16, an FP8 recipe) or with quantized linear layers
// (W8A8, W4A8 on an f32 model), so the formats can be compared on one checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "anvil/core/status.h"

namespace anvil::infer {

struct EvalOptions {
  std::string checkpoint;      // a checkpoint folder, a run folder, or its `latest` file
  std::string precision = "f32";
  std::string quant = "none";  // "none", "w8a8", "w4a8" (with precision f32)
  int64_t windows = 64;        // validation windows (fewer if the shard has fewer)
  int64_t seq_len = 0;         // 0: the run's train.seq_len
  std::string data_dir;        // empty: the run's data.dir
  int threads = 0;             // 0: ANVIL_THREADS or all cores
};

struct EvalResult {
  std::string checkpoint;
  int64_t step = 0;
  std::string precision, quant;
  int64_t windows = 0, tokens = 0;
  double loss = 0;        // mean cross-entropy, nats per token
  double perplexity = 0;  // exp(loss)
  double seconds = 0;     // evaluation only (not loading or quantizing)
  std::string note;       // what ran differs from what was asked (DelayedScalingNote, fewer
                          // windows), or empty
};

// `on_progress(windows done, windows)` after each window.
Result<EvalResult> EvaluateCheckpoint(const EvalOptions& options,
                                      const std::function<void(int64_t, int64_t)>& on_progress = {});

}  // namespace anvil::infer
