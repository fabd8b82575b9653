// ModelConfig: the Llama architecture's sizes, read from the "model.*" keys of
// a run config, validated once. Dimension names used across src/anvil/model:
//   B batch rows, T sequence length, N = B*T token rows, C = dim, NH heads,
//   NKV kv heads, HD = C / NH head dim, QKV = (NH + 2 NKV) HD, F = ffn_dim,
//   V = vocab_size, L = n_layers.
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/config.h"
#include "anvil/core/status.h"

namespace anvil::model {

// Where the training arithmetic runs (see llama.h).
enum class Precision : uint8_t {
  kF32,       // everything f32
  kBF16,      // GEMMs and attention read bf16 (f32 accumulation); the rest f32
  kFp8Tensor,  // the layers' linear GEMMs in FP8, one current scale per tensor (fp8_linear.h)
  kFp8Block,  // the layers' linear GEMMs in FP8, DeepSeek-V3 blockwise (fp8_linear.h); rest f32
  kMxfp8,     // the layers' linear GEMMs in MXFP8 (OCP MX v1.0); rest f32
  kFp8Delayed,  // as kFp8Tensor, each tensor's scale from its amax history (fp8_delayed_scaling.h)
};
// Only bf16 precision feeds bf16 activations (and a bf16 weight copy) to the
// GEMMs; the FP8 recipes keep f32 activations and quantize at each GEMM.
inline bool Bf16Activations(Precision p) { return p == Precision::kBF16; }
inline bool IsFp8(Precision p) {
  return p == Precision::kFp8Tensor || p == Precision::kFp8Delayed || p == Precision::kFp8Block ||
         p == Precision::kMxfp8;
}
// Which activations a training forward keeps for the backward (see llama.h).
enum class Recompute : uint8_t { kNone, kSelective, kFull };

// "f32" | "bf16" | "fp8-tensor" | "fp8-delayed" | "fp8-block" | "mxfp8"
Result<Precision> ParsePrecision(const std::string& name);
Result<Recompute> ParseRecompute(const std::string& name);  // "none" | "selective" | "full"
const char* PrecisionName(Precision p);
const char* RecomputeName(Recompute r);

struct ModelConfig {
  int64_t dim = 256;          // C
  int64_t n_layers = 4;       // L
  int64_t n_heads = 8;        // NH
  int64_t n_kv_heads = 4;     // NKV
  int64_t ffn_dim = 688;      // F
  int64_t vocab_size = 8192;  // V
  int64_t max_seq_len = 256;  // longest position + 1 (RoPE table rows)
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;
  bool tie_embeddings = false;  // lm_head shares embed_tokens' [V, C] buffer
  double init_std = 0.02;

  // Reads the "model.*" keys (absent keys keep the defaults above); validates.
  static Result<ModelConfig> FromConfig(Config& config);

  // What is wrong, naming the key ("model.n_kv_heads ...") and the fix.
  Status Validate() const;

  int64_t head_dim() const { return dim / n_heads; }                           // HD
  int64_t qkv_dim() const { return (n_heads + 2 * n_kv_heads) * head_dim(); }  // QKV

  // All parameters (embedding and, if untied, the LM head included).
  int64_t NumParams() const;
  // Parameters excluding the token embedding table. The LM head counts when it
  // is untied (it is a real GEMM); a tied head shares the embedding and does
  // not. This N is the one of the FLOP formula below.
  int64_t NumNonEmbeddingParams() const;
  // Training FLOPs per token for context length `seq_len` (forward + backward),
  // the PaLM/Chinchilla convention: 6 N (every parameter in a GEMM: 2 forward,
  // 4 backward) + 12 L T C (attention scores and values: QK^T and PV, forward
  // 2·2·T·C each token, backward twice that; non-causal count, as PaLM does).
  // The embedding lookup is not a GEMM; a tied head is added back as 6 V C.
  double FlopsPerToken(int64_t seq_len) const;
};

}  // namespace anvil::model
