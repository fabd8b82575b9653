// FP8 training recipes for the layers' linear GEMMs (precision fp8-tensor,
// fp8-delayed, fp8-block and mxfp8): every GEMM of the forward, the input gradient and the weight
// gradient quantizes its operands just before it (kernels/quant.h) and runs
// GemmFp8 with f32 accumulation. Master weights, optimizer state, norms,
// attention, softmax, the loss and the residual stream stay f32; the GEMMs
// kept out of FP8 (the LM head, the first and last fp8_high_precision_layers
// layers) run in f32 or bf16 (Fp8Recipe::high_precision_bf16).
//
//   role        A (rows x K)                      B                           K
//   forward     x [n, in], blocks along in        w [in, out]                 in
//   input grad  dy [n, out], blocks along out     w [in, out] as [n=in, k=out] out
//   weight grad x as xᵀ [in, n], along n          dy as dyᵀ [out, n], along n  n (tokens)
//
// fp8-tensor (current scaling): one scale per operand from its amax
// (fp8_max / amax), E4M3 (the gradient format selectable); the weight
// gradient's operands are cast transposed. fp8-delayed: the same with each
// tensor's scale from its amax history (fp8_delayed_scaling.h): one
// Fp8Linear per GEMM site (AtSite), sharing the buffers. fp8-block (DeepSeek-V3): E4M3
// everywhere (the gradient format selectable), 1 x 128 blocks for
// activations and gradients, 128 x 128 tiles for weights, partial sums
// promoted to f32 every 128 of K. mxfp8: E4M3 elements in blocks of 32 along
// K with an E8M0 scale (OCP rule, or NVIDIA's round-up), each operand
// quantized along its own K from the unquantized tensor, so the weight
// gradient's operands are quantized along the token axis (the "other axis"
// of the forward).
//
// Each operand is quantized afresh for each GEMM (the weights twice a step,
// three times with full recompute); buffers come from the model's
// activation arena.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "anvil/kernels/ctx.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/quant.h"
#include "anvil/model/config.h"
#include "anvil/model/fp8_delayed_scaling.h"
#include "anvil/model/low_precision_linear.h"
#include "anvil/model/shard.h"

namespace anvil::model {

struct Fp8Recipe {
  enum class Kind : uint8_t { kTensor, kDelayed, kBlock, kMx };
  Kind kind = Kind::kBlock;
  kernels::Fp8Format forward = kernels::Fp8Format::kE4M3;  // activations and weights
  kernels::Fp8Format grad = kernels::Fp8Format::kE4M3;     // output gradients
  kernels::BlockScale mx_rule = kernels::BlockScale::kMxOcp;
  // What the FP8 values are decoded to for the dot products (the machine's faster one).
  kernels::Fp8Decode decode = kernels::Fp8Decode::kF32;
  // Delayed scaling: steps of amax history, and its reduction (max, or the most recent).
  int amax_history = 16;
  bool amax_most_recent = false;
  // The GEMMs kept out of FP8 in bf16, else f32: the LM head as the bf16
  // model runs it (its input and output gradient rounded to bf16, the
  // model's bf16 copy of its weight, f32 sums), the kept layers' through
  // Bf16Linear (bf16_linear.h).
  bool high_precision_bf16 = false;
};

// Whether an FP8 precision runs the GEMMs it keeps out of FP8 in bf16.
inline bool KeptInBf16(Precision precision, const Fp8Recipe& fp8) {
  return IsFp8(precision) && fp8.high_precision_bf16;
}

// Whether a model of `precision` keeps a bf16 copy of its weights: bf16, and
// the FP8 precisions whose kept GEMMs run in bf16 (the LM head reads the copy).
inline bool HoldsBf16Weights(Precision precision, const Fp8Recipe& fp8) {
  return precision == Precision::kBF16 || KeptInBf16(precision, fp8);
}

// Whether any GEMM of a model of `precision` runs bf16 dot products: bf16,
// and the FP8 recipes that decode to bf16 or keep GEMMs in bf16. It names
// the kernels a run depends on (KernelCtx::BitsName): ranks whose gradients
// are summed, and a rollout engine and its trainer, must agree on them.
inline bool RunsBf16Gemms(Precision precision, const Fp8Recipe& fp8) {
  return precision == Precision::kBF16 ||
         (IsFp8(precision) && (fp8.decode == kernels::Fp8Decode::kBf16 || fp8.high_precision_bf16));
}

class Fp8Linear : public LowPrecisionLinear {
 public:
  // Buffers for operands of up to `max_a` and `max_b` codes with up to
  // `scales_a` and `scales_b` block scales, carved by `alloc(bytes)` (a
  // counter, then the arena). MakeFp8Linear sizes them for a model.
  template <typename Alloc>
  Fp8Linear(const Fp8Recipe& recipe, int64_t max_a, int64_t max_b, int64_t scales_a,
            int64_t scales_b, Alloc&& alloc)
      : recipe_(recipe) {
    auto bytes = [&](int64_t n) {
      return reinterpret_cast<uint8_t*>(alloc(static_cast<size_t>(n)));
    };
    auto floats = [&](int64_t n) {
      return reinterpret_cast<float*>(alloc(static_cast<size_t>(n) * 4));
    };
    a_ = {bytes(max_a), floats(scales_a), bytes(scales_a), max_a, scales_a};
    b_ = {bytes(max_b), floats(scales_b), bytes(scales_b), max_b, scales_b};
  }

  const Fp8Recipe& recipe() const { return recipe_; }

  // Delayed scaling: this recipe at GEMM site `site` (a layer's LinearSite:
  // layer * kLinearSites + site) with scales from `delayed`, on the same buffers.
  Fp8Linear AtSite(int site, Fp8DelayedScaling* delayed) const {
    Fp8Linear at = *this;
    at.site_ = site;
    at.delayed_ = delayed;
    return at;
  }

  // y[n, out] (+)= x[n, in] · w[in, out].
  void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const float* x,
               const float* w, float* y, bool accumulate) const override;
  // Decoding: w's forward operand quantized once into `packed` (for this
  // recipe's inputs; again after w changes), and Forward with it: the same
  // bits as Forward with w.
  void PackWeight(const kernels::KernelCtx& ctx, int64_t in, int64_t out, const float* w,
                  kernels::PackedFp8B* packed) const;
  void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const float* x,
               const kernels::PackedFp8B& w, float* y, bool accumulate) const;
  // dx[n, in] = dy[n, out] · w[in, out]ᵀ.
  void BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                    const float* dy, const float* w, float* dx) const override;
  // dw[in, out] += x[n, in]ᵀ · dy[n, out].
  void BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                      const float* x, const float* dy, float* dw) const override;

 private:
  struct Buffers {
    uint8_t* codes;
    float* scales;
    uint8_t* e8m0;
    int64_t max_codes;
    int64_t max_scales;
  };
  // The forward's operands: x [n, in] quantized along `in`, and w [in, out]
  // (g->trans_b set where the recipe stores it [out, in]).
  kernels::Fp8Operand ForwardInput(const kernels::KernelCtx& ctx, int64_t n, int64_t in,
                                   const float* x) const;
  kernels::Fp8Operand ForwardWeight(const kernels::KernelCtx& ctx, int64_t in, int64_t out,
                                    const float* w, kernels::GemmArgs* g) const;
  // The recipe's blocks along K (1 x 128 with f32 scales, or MX 32 with E8M0).
  kernels::BlockQuant Blocks(kernels::Fp8Format format) const;
  // The GEMM operand of codes quantized with q into buf, and where q's scales go.
  static kernels::Fp8Operand BlockOperand(const kernels::BlockQuant& q, const Buffers& buf);
  static kernels::QuantScales ScalesFor(const kernels::BlockQuant& q, const Buffers& buf);
  // CHECKs that an operand of rows x k in blocks of `block` fits `buf`.
  static void CheckFits(const Buffers& buf, int64_t rows, int64_t k, int64_t block);
  // x [rows, k] quantized along its rows (blocks along k) into `buf`.
  kernels::Fp8Operand Rows(const kernels::KernelCtx& ctx, int64_t rows, int64_t k, const float* x,
                           kernels::Fp8Format format, const Buffers& buf) const;
  // x [k, cols] quantized along its columns, written as [cols, k].
  kernels::Fp8Operand ColumnsTransposed(const kernels::KernelCtx& ctx, int64_t k, int64_t cols,
                                        const float* x, kernels::Fp8Format format,
                                        const Buffers& buf) const;
  // x [rows, cols] with one current scale (fp8_max / amax); `transposed`
  // writes it [cols, rows].
  // (delayed scaling: the scale of tensor `op` of this site.)
  kernels::Fp8Operand Tensor(const kernels::KernelCtx& ctx, int64_t rows, int64_t cols,
                             const float* x, kernels::Fp8Format format, bool transposed,
                             Fp8DelayedScaling::Operand op, const Buffers& buf) const;
  bool Tensorwise() const {
    return recipe_.kind == Fp8Recipe::Kind::kTensor || recipe_.kind == Fp8Recipe::Kind::kDelayed;
  }
  // w [rows, cols] in 128 x 128 tiles.
  kernels::Fp8Operand Tiles(const kernels::KernelCtx& ctx, int64_t rows, int64_t cols,
                            const float* w, const Buffers& buf) const;

  Fp8Recipe recipe_;
  Buffers a_, b_;
  int site_ = 0;
  Fp8DelayedScaling* delayed_ = nullptr;  // fp8-delayed's state (shared by the sites)
};

// The FP8 linear layers of a model (precision fp8-tensor, fp8-delayed, fp8-block or mxfp8,
// which sets the recipe's kind) with layers of `shape`, for up to `tokens` rows a call:
// buffers for the widest activation and the largest weight.
template <typename Alloc>
std::shared_ptr<Fp8Linear> MakeFp8Linear(Precision precision, Fp8Recipe recipe,
                                         const BlockShape& shape, int64_t tokens, Alloc&& alloc) {
  const int64_t c = shape.dim, f = shape.ffn, q = shape.q(), qkv = shape.qkv();
  const int64_t widest = std::max({c, q, f, qkv, 2 * f});
  const int64_t weight = std::max({c * qkv, q * c, c * 2 * f, f * c});
  // Scales come in blocks of 32 or more along K: an operand of R rows of K
  // needs at most R * ceil(K / 32). A: tokens x a dimension, or transposed;
  // B: a weight either way round, or a gradient transposed.
  auto blocks = [](int64_t k) { return (k + 31) / 32; };
  const int64_t scales_a = tokens * blocks(widest) + widest * blocks(tokens);
  const int64_t scales_b = std::max(widest * blocks(widest), widest * blocks(tokens));
  recipe.kind = precision == Precision::kMxfp8        ? Fp8Recipe::Kind::kMx
                : precision == Precision::kFp8Tensor  ? Fp8Recipe::Kind::kTensor
                : precision == Precision::kFp8Delayed ? Fp8Recipe::Kind::kDelayed
                                                      : Fp8Recipe::Kind::kBlock;
  return std::make_shared<Fp8Linear>(recipe, tokens * widest, std::max(tokens * widest, weight),
                                     scales_a, scales_b, alloc);
}

}  // namespace anvil::model
