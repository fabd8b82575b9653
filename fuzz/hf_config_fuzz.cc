// libFuzzer target: a Hugging Face config.json (ParseHfConfig), read from a
// checkpoint folder and sent to remote rollout ranks as their model's shape.
// A config it accepts passes ModelConfig::Validate, and writing it out and
// reading it back gives the same shape.
#include <cstddef>
#include <cstdint>
#include <string>

#include "anvil/core/check.h"
#include "anvil/model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const anvil::Result<anvil::model::ModelConfig> c =
      anvil::model::ParseHfConfig(text, "fuzz/config.json");
  if (!c.ok()) return 0;
  CHECK(c->Validate().ok());
  const anvil::Result<anvil::model::ModelConfig> again =
      anvil::model::ParseHfConfig(anvil::model::HfConfigJson(*c), "fuzz/again.json");
  CHECK(again.ok()) << again.status().ToString();
  CHECK(again->dim == c->dim && again->n_layers == c->n_layers && again->n_heads == c->n_heads &&
        again->n_kv_heads == c->n_kv_heads && again->ffn_dim == c->ffn_dim &&
        again->vocab_size == c->vocab_size && again->max_seq_len == c->max_seq_len &&
        again->tie_embeddings == c->tie_embeddings);
  return 0;
}
