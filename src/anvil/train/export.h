// `anvil export`: a checkpoint of any layout as one Hugging Face Llama folder
// (model.safetensors in f32 with Hugging Face Llama names, config.json,
// tokenizer.json), the layout transformers' LlamaForCausalLM reads.
#pragma once

#include <string>

#include "anvil/core/status.h"

namespace anvil::train {

struct ExportOptions {
  std::string checkpoint;  // a run folder (its latest), a step folder or a `latest` file
  std::string out;         // created; existing files of the same names are replaced
  std::string tokenizer;   // tokenizer.json; empty: <data.dir>/tokenizer.json of the run
};

struct ExportResult {
  std::string checkpoint_dir;  // the checkpoint exported
  int64_t step = 0;
  int64_t parameters = 0;
};

// Verifies the checkpoint (manifest checksums), loads its weights into a
// model of its config (so every tensor is checked) and writes them whole.
Result<ExportResult> ExportCheckpoint(const ExportOptions& options);

}  // namespace anvil::train
