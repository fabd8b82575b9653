// ModelConfig: reading "model.*" keys, validation and parameter/FLOP counts.
#include "anvil/model/config.h"

#include <fmt/core.h>

namespace anvil::model {

Result<Precision> ParsePrecision(const std::string& name) {
  if (name == "f32") return Precision::kF32;
  if (name == "bf16") return Precision::kBF16;
  if (name == "fp8-tensor") return Precision::kFp8Tensor;
  if (name == "fp8-delayed") return Precision::kFp8Delayed;
  if (name == "fp8-block") return Precision::kFp8Block;
  if (name == "mxfp8") return Precision::kMxfp8;
  return InvalidArgument(
      fmt::format("precision '{}': expected f32, bf16, fp8-tensor, fp8-delayed, fp8-block or mxfp8",
                  name));
}

Result<Recompute> ParseRecompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return InvalidArgument(fmt::format("recompute '{}': expected none, selective or full", name));
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "f32";
    case Precision::kBF16:
      return "bf16";
    case Precision::kFp8Tensor:
      return "fp8-tensor";
    case Precision::kFp8Delayed:
      return "fp8-delayed";
    case Precision::kFp8Block:
      return "fp8-block";
    case Precision::kMxfp8:
      return "mxfp8";
  }
  return "?";
}

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "?";
}

Result<ModelConfig> ModelConfig::FromConfig(Config& config) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.dim, config.GetInt("model.dim", c.dim));
  ASSIGN_OR_RETURN(c.n_layers, config.GetInt("model.n_layers", c.n_layers));
  ASSIGN_OR_RETURN(c.n_heads, config.GetInt("model.n_heads", c.n_heads));
  ASSIGN_OR_RETURN(c.n_kv_heads, config.GetInt("model.n_kv_heads", c.n_kv_heads));
  ASSIGN_OR_RETURN(c.ffn_dim, config.GetInt("model.ffn_dim", c.ffn_dim));
  ASSIGN_OR_RETURN(c.vocab_size, config.GetInt("model.vocab_size", c.vocab_size));
  ASSIGN_OR_RETURN(c.max_seq_len, config.GetInt("model.max_seq_len", c.max_seq_len));
  ASSIGN_OR_RETURN(c.rope_theta, config.GetDouble("model.rope_theta", c.rope_theta));
  ASSIGN_OR_RETURN(c.norm_eps, config.GetDouble("model.norm_eps", c.norm_eps));
  ASSIGN_OR_RETURN(c.tie_embeddings, config.GetBool("model.tie_embeddings", c.tie_embeddings));
  ASSIGN_OR_RETURN(c.init_std, config.GetDouble("model.init_std", c.init_std));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

Status ModelConfig::Validate() const {
  auto bad = [](const std::string& what) { return InvalidArgument("model config: " + what); };
  // The upper bounds are far beyond what fits in memory; they keep every size
  // computed from the config (bytes included) inside int64.
  if (dim <= 0 || dim > (1 << 18))
    return bad(fmt::format("model.dim = {} must be in [1, 2^18]", dim));
  if (n_layers <= 0 || n_layers > 4096) {
    return bad(fmt::format("model.n_layers = {} must be in [1, 4096]", n_layers));
  }
  if (n_heads <= 0) return bad(fmt::format("model.n_heads = {} must be positive", n_heads));
  if (n_kv_heads <= 0 || n_heads % n_kv_heads != 0) {
    return bad(fmt::format("model.n_kv_heads = {} must be positive and divide model.n_heads = {}",
                           n_kv_heads, n_heads));
  }
  if (dim % n_heads != 0) {
    return bad(
        fmt::format("model.dim = {} must equal model.n_heads ({}) x head_dim: it is not a "
                    "multiple of n_heads",
                    dim, n_heads));
  }
  const int64_t hd = dim / n_heads;
  if (hd % 16 != 0 || hd > 256) {
    return bad(
        fmt::format("head_dim = model.dim / model.n_heads = {} / {} = {} must be a "
                    "multiple of 16 in [16, 256] (the attention kernels' tile)",
                    dim, n_heads, hd));
  }
  if (ffn_dim <= 0 || ffn_dim > (1 << 20)) {
    return bad(fmt::format("model.ffn_dim = {} must be in [1, 2^20]", ffn_dim));
  }
  if (vocab_size <= 1 || vocab_size >= (int64_t{1} << 31)) {
    return bad(fmt::format("model.vocab_size = {} must be in [2, 2^31)", vocab_size));
  }
  if (max_seq_len <= 0 || max_seq_len >= (int64_t{1} << 24)) {
    return bad(fmt::format("model.max_seq_len = {} must be in [1, 2^24)", max_seq_len));
  }
  if (!(rope_theta > 1.0)) return bad(fmt::format("model.rope_theta = {} must be > 1", rope_theta));
  if (!(norm_eps > 0.0)) return bad(fmt::format("model.norm_eps = {} must be > 0", norm_eps));
  if (!(init_std > 0.0)) return bad(fmt::format("model.init_std = {} must be > 0", init_std));
  return Status::Ok();
}

int64_t ModelConfig::NumNonEmbeddingParams() const {
  const int64_t c = dim, f = ffn_dim;
  const int64_t per_layer = c /*attn norm*/ + c * qkv_dim() + n_heads * head_dim() * c +
                            c /*mlp norm*/ + c * 2 * f + f * c;
  return n_layers * per_layer + c /*final norm*/ + (tie_embeddings ? 0 : vocab_size * c);
}

int64_t ModelConfig::NumParams() const { return NumNonEmbeddingParams() + vocab_size * dim; }

double ModelConfig::FlopsPerToken(int64_t seq_len) const {
  const double n_gemm = static_cast<double>(NumNonEmbeddingParams()) +
                        (tie_embeddings ? static_cast<double>(vocab_size * dim) : 0.0);
  return 6.0 * n_gemm + 12.0 * static_cast<double>(n_layers * seq_len * dim);
}

}  // namespace anvil::model
