// Text generation from a checkpoint: loads the weights (verified against the
// manifest) and the run's tokenizer (data.dir of the checkpoint's config),
// prefills bos + prompt through the KV-cache decoder, then samples one token
// at a time until eos, --max-new tokens or model.max_seq_len.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "anvil/core/status.h"
#include "anvil/infer/sampling.h"

namespace anvil::infer {

struct GenerateOptions {
  std::string checkpoint;  // a checkpoint folder, a run folder, or its `latest` file
  std::string prompt;
  int64_t max_new = 100;
  SamplingConfig sampling;
  int threads = 0;         // 0: ANVIL_THREADS or all cores
  std::string tokenizer;   // tokenizer.json; empty: <data.dir>/tokenizer.json of the run
};

struct GenerateResult {
  std::string checkpoint;  // the folder loaded
  int64_t step = 0;
  std::string text;        // the generated continuation
  int64_t prompt_tokens = 0;
  int64_t new_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::string stop_reason;  // "eos", "max_new", "max_seq_len"
};

// `on_text` receives each new token's bytes as it is sampled.
Result<GenerateResult> Generate(const GenerateOptions& options,
                                const std::function<void(std::string_view)>& on_text = {});

}  // namespace anvil::infer
