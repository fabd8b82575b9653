// Hugging Face config.json (see hf_config.h).
#include "anvil/model/hf_config.h"

#include <fmt/core.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "anvil/core/file_util.h"

namespace anvil::model {

std::string HfConfigJson(const ModelConfig& c, const HfTokenIds& token_ids) {
  nlohmann::ordered_json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = c.dim;
  j["intermediate_size"] = c.ffn_dim;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["num_hidden_layers"] = c.n_layers;
  j["vocab_size"] = c.vocab_size;
  j["rms_norm_eps"] = c.norm_eps;
  j["rope_theta"] = c.rope_theta;
  j["max_position_embeddings"] = c.max_seq_len;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["hidden_act"] = "silu";
  j["initializer_range"] = c.init_std;
  j["torch_dtype"] = "float32";
  for (const auto& [key, id] : token_ids) j[key] = id;
  return j.dump(2) + "\n";
}

Result<ModelConfig> ReadHfConfig(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseHfConfig(text, path);
}

namespace {

// A config.json is flat; deeper nesting is refused while parsing, before
// anything recursive (an error message's dump()) walks it.
constexpr int kMaxJsonDepth = 64;

}  // namespace

Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& path) {
  ModelConfig c;
  try {
    const nlohmann::json j =
        nlohmann::json::parse(text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
          if (depth > kMaxJsonDepth) {
            throw std::runtime_error(
                fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth));
          }
          return true;
        });
    if (!j.is_object()) throw std::runtime_error("not a JSON object");
    // An integer key, read only as one: nlohmann's get<int64_t>() of 1e300
    // would convert out of range (undefined behaviour), and of 2.5 truncate.
    auto get_int = [&](const char* key, int64_t& v, bool required = true) {
      if (!j.contains(key)) {
        if (!required) return;
        throw std::runtime_error(fmt::format("missing key \"{}\"", key));
      }
      const nlohmann::json& x = j.at(key);
      const bool fits = x.is_number_integer() &&
                        (!x.is_number_unsigned() || x.get<uint64_t>() <= uint64_t{INT64_MAX});
      if (!fits) {
        throw std::runtime_error(fmt::format("\"{}\" is not an integer: {}", key,
                                             x.is_structured() ? x.type_name() : x.dump()));
      }
      v = x.get<int64_t>();
    };
    get_int("hidden_size", c.dim);
    get_int("intermediate_size", c.ffn_dim);
    get_int("num_attention_heads", c.n_heads);
    c.n_kv_heads = c.n_heads;
    get_int("num_key_value_heads", c.n_kv_heads, /*required=*/false);
    get_int("num_hidden_layers", c.n_layers);
    get_int("vocab_size", c.vocab_size);
    c.norm_eps = j.value("rms_norm_eps", 1e-6);
    c.rope_theta = j.value("rope_theta", 10000.0);
    get_int("max_position_embeddings", c.max_seq_len);
    c.tie_embeddings = j.value("tie_word_embeddings", false);
    c.init_std = j.value("initializer_range", 0.02);
  } catch (const std::exception& e) {
    return InvalidArgument(fmt::format("{}: not a Llama config.json: {}", path, e.what()));
  }
  Status s = c.Validate();
  if (!s.ok()) return s.WithContext(path);
  return c;
}

}  // namespace anvil::model
