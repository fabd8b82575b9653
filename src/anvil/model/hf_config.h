// A Hugging Face Llama config.json: written with a checkpoint, read back from
// one (anvil's or HF's), and sent to remote rollout ranks as their model's
// shape. Reading is a parser of outside input (fuzz/hf_config_fuzz.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/model/config.h"

namespace anvil::model {

// Token ids config.json may name ("bos_token_id", ...): a tokenizer's, so a
// Hugging Face generate() starts and stops as anvil does.
using HfTokenIds = std::vector<std::pair<std::string, int64_t>>;

// The config.json text: architectures ["LlamaForCausalLM"], hidden_size, ...,
// then `token_ids`.
std::string HfConfigJson(const ModelConfig& config, const HfTokenIds& token_ids = {});
// Reads a config.json written by HfConfigJson (or by HF for a Llama).
Result<ModelConfig> ReadHfConfig(const std::string& path);
// The same from its text (`where` names it in errors). The shape's keys must
// be JSON integers; the config must pass ModelConfig::Validate.
Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& where);

}  // namespace anvil::model
