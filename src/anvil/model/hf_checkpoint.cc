// Hugging Face Llama checkpoint export/import (see hf_checkpoint.h).
#include "anvil/model/hf_checkpoint.h"

#include <fmt/core.h>

#include <cstring>
#include <set>

#include "anvil/core/convert.h"
#include "anvil/core/file_util.h"
#include "anvil/io/safetensors.h"

namespace anvil::model {
namespace {

// How one HF tensor maps onto our layout: columns [col, col + cols) of the
// stored [rows, ld] tensor at `offset`, transposed (HF [cols, rows]) or not.
struct HfSlot {
  std::string name;
  int64_t offset = 0;
  int64_t rows = 0;
  int64_t ld = 0;
  int64_t col = 0;
  int64_t cols = 0;
  bool transpose = false;
  bool is_vector = false;  // a norm weight: HF shape [C]
  std::vector<int64_t> hf_shape() const {
    if (is_vector) return {cols};
    return transpose ? std::vector<int64_t>{cols, rows} : std::vector<int64_t>{rows, cols};
  }
};

std::vector<HfSlot> Slots(const LlamaParams& params) {
  // Hugging Face files hold whole tensors: a tensor-parallel slice is
  // gathered (or cut) by its caller first.
  CHECK_EQ(params.shard().size, 1) << "HF checkpoints are read and written whole (one tp rank)";
  const ModelConfig& cfg = params.config();
  const int64_t hd = cfg.head_dim(), q = cfg.n_heads * hd, kv = cfg.n_kv_heads * hd;
  const int64_t c = cfg.dim, f = cfg.ffn_dim;
  std::vector<HfSlot> slots;
  for (const ParamInfo& p : params.params()) {
    const std::string l = fmt::format("model.layers.{}.", p.layer);
    const int64_t rows = p.shape[0], ld = p.shape.size() > 1 ? p.shape[1] : 1;
    auto plain = [&](std::string name) {
      slots.push_back({std::move(name), p.offset, rows, ld, 0, ld, false});
    };
    auto vector = [&](std::string name) {
      slots.push_back({std::move(name), p.offset, 1, p.numel, 0, p.numel, false, true});
    };
    auto block = [&](std::string name, int64_t col, int64_t cols) {
      slots.push_back({std::move(name), p.offset, rows, ld, col, cols, true});
    };
    switch (p.kind) {
      case ParamKind::kEmbed: plain("model.embed_tokens.weight"); break;
      case ParamKind::kAttnNorm: vector(l + "input_layernorm.weight"); break;
      case ParamKind::kWqkv:
        block(l + "self_attn.q_proj.weight", 0, q);
        block(l + "self_attn.k_proj.weight", q, kv);
        block(l + "self_attn.v_proj.weight", q + kv, kv);
        break;
      case ParamKind::kWo: block(l + "self_attn.o_proj.weight", 0, c); break;
      case ParamKind::kMlpNorm: vector(l + "post_attention_layernorm.weight"); break;
      case ParamKind::kWGateUp:
        block(l + "mlp.gate_proj.weight", 0, f);
        block(l + "mlp.up_proj.weight", f, f);
        break;
      case ParamKind::kWDown: block(l + "mlp.down_proj.weight", 0, c); break;
      case ParamKind::kFinalNorm: vector("model.norm.weight"); break;
      case ParamKind::kLmHead: plain("lm_head.weight"); break;
    }
  }
  return slots;
}

}  // namespace

std::vector<HfTensor> ToHfTensors(const LlamaParams& params, std::span<const float> buffer) {
  CHECK_EQ(static_cast<int64_t>(buffer.size()), params.size()) << "buffer of another layout";
  std::vector<HfTensor> out;
  for (const HfSlot& s : Slots(params)) {
    HfTensor t{s.name, s.hf_shape(), std::vector<float>(s.rows * s.cols)};
    const float* src = buffer.data() + s.offset;
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t j = 0; j < s.cols; ++j) {
        const float v = src[r * s.ld + s.col + j];
        if (s.transpose) {
          t.data[j * s.rows + r] = v;
        } else {
          t.data[r * s.cols + j] = v;
        }
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

Status SaveHfCheckpoint(const std::string& dir, const LlamaParams& params,
                        const HfTokenIds& token_ids) {
  RETURN_IF_ERROR(MakeDirectories(dir));
  const std::vector<HfTensor> tensors = ToHfTensors(params, params.weights());
  std::vector<io::TensorRef> refs;
  for (const HfTensor& t : tensors) refs.push_back({t.name, DType::kF32, t.shape, t.data.data()});
  RETURN_IF_ERROR(io::WriteSafetensors(dir + "/model.safetensors", refs, {{"format", "pt"}}));
  return WriteFileAtomic(dir + "/config.json", HfConfigJson(params.config(), token_ids));
}

Status CheckHfConfig(const std::string& dir, const ModelConfig& want) {
  const std::string config_path = dir + "/config.json";
  ASSIGN_OR_RETURN(ModelConfig c, ReadHfConfig(config_path));
  auto mismatch = [&](const char* key, auto got, auto expected) {
    return InvalidArgument(fmt::format("{}: {} is {} but the model has {}", config_path, key, got,
                                       expected));
  };
  if (c.dim != want.dim) return mismatch("hidden_size", c.dim, want.dim);
  if (c.ffn_dim != want.ffn_dim) return mismatch("intermediate_size", c.ffn_dim, want.ffn_dim);
  if (c.n_heads != want.n_heads) return mismatch("num_attention_heads", c.n_heads, want.n_heads);
  if (c.n_kv_heads != want.n_kv_heads) {
    return mismatch("num_key_value_heads", c.n_kv_heads, want.n_kv_heads);
  }
  if (c.n_layers != want.n_layers) return mismatch("num_hidden_layers", c.n_layers, want.n_layers);
  if (c.vocab_size != want.vocab_size) return mismatch("vocab_size", c.vocab_size, want.vocab_size);
  if (c.tie_embeddings != want.tie_embeddings) {
    return mismatch("tie_word_embeddings", c.tie_embeddings, want.tie_embeddings);
  }
  return Status::Ok();
}

Status LoadHfCheckpoint(const std::string& dir, LlamaParams& params) {
  RETURN_IF_ERROR(CheckHfConfig(dir, params.config()));
  const std::string path = dir + "/model.safetensors";
  ASSIGN_OR_RETURN(io::SafetensorsFile file, io::SafetensorsFile::Read(path));
  const std::vector<HfSlot> slots = Slots(params);
  std::set<std::string> expected;
  for (const HfSlot& s : slots) expected.insert(s.name);
  for (const auto& [name, entry] : file.entries()) {
    if (expected.count(name) == 0) {
      return InvalidArgument(fmt::format("{}: unexpected tensor '{}' (not part of this model{})",
                                         path, name,
                                         name == "lm_head.weight" ? ": the config ties embeddings"
                                                                  : ""));
    }
  }
  float* w = params.weights().data();
  std::memset(w, 0, params.size() * sizeof(float));  // alignment padding stays 0
  // One tensor at a time: its bytes copied out (a tensor's offset in the file
  // need not be aligned for its type), then widened to f32 (exact for all three).
  std::vector<std::byte> raw;
  std::vector<float> decoded;
  for (const HfSlot& s : slots) {
    // Hugging Face checkpoints are often saved in bf16 or f16; both widen to
    // f32 exactly. Anything else (fp8, ints) would need a recipe to dequantize.
    const auto entry = file.entries().find(s.name);
    const DType dtype = entry == file.entries().end() ? DType::kF32 : entry->second.dtype;
    if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
      return InvalidArgument(fmt::format("{}: tensor '{}' is {}; weights load from F32, BF16 or F16",
                                         path, s.name, DTypeName(dtype)));
    }
    ASSIGN_OR_RETURN(const void* data, file.Get(s.name, dtype, s.hf_shape()));
    const int64_t count = s.rows * s.cols;
    raw.resize(DTypeBytes(dtype, count));
    std::memcpy(raw.data(), data, raw.size());
    decoded.resize(static_cast<size_t>(count));
    ConvertToF32(Isa::kScalar, dtype, raw.data(), decoded.data(), count);
    const float* src = decoded.data();
    float* dst = w + s.offset;
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t j = 0; j < s.cols; ++j) {
        dst[r * s.ld + s.col + j] = src[s.transpose ? j * s.rows + r : r * s.cols + j];
      }
    }
  }
  return Status::Ok();
}

}  // namespace anvil::model
