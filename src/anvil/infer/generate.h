// Text generation from a checkpoint: loads the weights (verified against the
// manifest) and the run's tokenizer (data.dir of the checkpoint's config),
// prefills bos + prompt through the KV-cache decoder (a prompt longer than
// the context keeps its end, with a notice), then samples one token
// at a time until eos, a stop string, --max-new tokens or model.max_seq_len.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/data/tokenizer.h"
#include "anvil/infer/sampling.h"

namespace anvil::infer {

struct GenerateOptions {
  std::string checkpoint;  // a checkpoint folder, a run folder, or its `latest` file
  std::string prompt;
  int64_t max_new = 100;
  SamplingConfig sampling;
  int threads = 0;         // 0: ANVIL_THREADS or all cores
  std::string tokenizer;   // tokenizer.json; empty: <data.dir>/tokenizer.json of the run
  std::string precision = "f32";  // the model's: f32, bf16 or an FP8 recipe
  // The layers' linear GEMMs: "none", or "w8a8" / "w4a8" (model/int_linear.h; precision f32).
  std::string quant = "none";
  // Generation also ends once the text holds one of these (stop_strings.h;
  // the text keeps it).
  std::vector<std::string> stop;
};

struct GenerateResult {
  std::string checkpoint;  // the folder loaded
  int64_t step = 0;
  std::string text;        // the generated continuation
  int64_t prompt_tokens = 0;          // fed to the model (bos included)
  int64_t prompt_tokens_dropped = 0;  // cut from the prompt's start to fit the context
  int64_t new_tokens = 0;
  int64_t quant_weight_bytes = 0;  // the quantized layer weights (0 without --quant)
  double quantize_seconds = 0;     // quantizing (or packing) the weights, once
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::string stop_reason;  // "eos", "stop", "max_new", "max_seq_len"
};

// `on_text` receives each new token's bytes as it is sampled; `on_notice` a
// sentence about a change made to the request (a prompt cut to fit the context).
// The tokenizer of a checkpoint folder: `override_path` if given, else its
// own tokenizer.json if it holds one, else <data.dir>/tokenizer.json of the
// run config saved in it (config.toml);
// loaded and checked to fit the model's vocabulary (config.json).
Result<data::Tokenizer> CheckpointTokenizer(const std::string& checkpoint_dir,
                                            const std::string& override_path,
                                            std::string* path_used = nullptr);

Result<GenerateResult> Generate(const GenerateOptions& options,
                                const std::function<void(std::string_view)>& on_text = {},
                                const std::function<void(const std::string&)>& on_notice = {});

}  // namespace anvil::infer
