// Weights as a Hugging Face Llama checkpoint: model.safetensors with HF tensor
// names in HF's [out, in] orientation (our fused [in, out] tensors are split
// and transposed on save, the reverse on load) plus a HF-style config.json.
// Loading validates the config, every name, shape and dtype; errors name the
// file and the tensor.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/model/config.h"
#include "anvil/model/hf_config.h"
#include "anvil/model/weights.h"

namespace anvil::model {

// One tensor in HF naming and orientation (owned f32 copy).
struct HfTensor {
  std::string name;             // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;   // [out, in]
  std::vector<float> data;
};

// Any buffer of the params' layout (weights, grads, Adam moments) as HF
// tensors, in HF's usual order (lm_head.weight omitted when tied).
std::vector<HfTensor> ToHfTensors(const LlamaParams& params, std::span<const float> buffer);

// dir/model.safetensors (f32) and dir/config.json; dir is created if missing.
Status SaveHfCheckpoint(const std::string& dir, const LlamaParams& params,
                        const HfTokenIds& token_ids = {});
// dir/config.json describes `config` (else an error naming the key that differs).
Status CheckHfConfig(const std::string& dir, const ModelConfig& config);
// Loads dir/model.safetensors into params' master weights (not the bf16
// shadow: call RefreshBf16 after). dir/config.json must describe params.config().
Status LoadHfCheckpoint(const std::string& dir, LlamaParams& params);

}  // namespace anvil::model
