// The GEMMs an FP8 model keeps out of FP8 (the first and last
// fp8_high_precision_layers layers), run in bf16 where the recipe says so
// (Fp8Recipe::high_precision_bf16): both operands rounded to bf16 just before
// each GEMM (RNE: a weight's bits are those of the model's bf16 copy), f32
// sums, f32 results; the activations around them stay f32, as in the FP8
// layers. Buffers come from the model's activation arena.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/low_precision_linear.h"
#include "anvil/model/shard.h"

namespace anvil::model {

class Bf16Linear : public LowPrecisionLinear {
 public:
  // Rounded operands of up to `max_a` (the GEMM's A) and `max_b` (its B)
  // values, carved by `alloc(bytes)` (a counter, then the arena).
  template <typename Alloc>
  Bf16Linear(int64_t max_a, int64_t max_b, Alloc&& alloc)
      : a_(reinterpret_cast<BF16*>(alloc(static_cast<size_t>(max_a) * sizeof(BF16)))),
        b_(reinterpret_cast<BF16*>(alloc(static_cast<size_t>(max_b) * sizeof(BF16)))),
        max_a_(max_a),
        max_b_(max_b) {}

  // y[n, out] (+)= x[n, in] · w[in, out].
  void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const float* x,
               const float* w, float* y, bool accumulate) const override;
  // dx[n, in] = dy[n, out] · w[in, out]ᵀ.
  void BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                    const float* dy, const float* w, float* dx) const override;
  // dw[in, out] += x[n, in]ᵀ · dy[n, out].
  void BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                      const float* x, const float* dy, float* dw) const override;

 private:
  // src [count] rounded into `dst` (a_ or b_, of `capacity` values).
  const BF16* Round(const kernels::KernelCtx& ctx, const float* src, int64_t count, BF16* dst,
                    int64_t capacity) const;

  BF16* a_;
  BF16* b_;
  int64_t max_a_, max_b_;
};

// The bf16 GEMMs of layers of `shape` for up to `tokens` rows a call: A holds
// the widest activation, B the largest weight or an output gradient.
template <typename Alloc>
std::shared_ptr<Bf16Linear> MakeBf16Linear(const BlockShape& shape, int64_t tokens, Alloc&& alloc) {
  const int64_t c = shape.dim, f = shape.ffn;
  const int64_t widest = std::max({c, shape.q(), f, shape.qkv(), 2 * f});
  const int64_t weight = std::max({c * shape.qkv(), shape.q() * c, c * 2 * f, f * c});
  return std::make_shared<Bf16Linear>(tokens * widest, std::max(tokens * widest, weight), alloc);
}

}  // namespace anvil::model
