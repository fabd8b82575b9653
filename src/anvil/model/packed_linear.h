// An f32 model's linear GEMMs with their weights packed once for decoding
// (kernels::PackedB). A decode step multiplies by the same weights as the
// step before, and Gemm packs B in every call once it is past the L2 or
// transposed (the LM head, stored [vocab, dim], always is): repeated work,
// the largest share of a batched decode step on the small model. Through
// PackedB the logits keep Gemm's bits, so decoding stays bitwise equal to
// the training forward (contract 3). Pack before decoding and again after
// the weights change (an RL update); inference only (the backward
// CHECK-fails). Costs a packed copy of the weights.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "anvil/kernels/gemm.h"
#include "anvil/model/forward_weights.h"
#include "anvil/model/low_precision_linear.h"

namespace anvil::model {

class PackedLinear : public LowPrecisionLinear {
 public:
  // For `model`'s layer weights and LM head (an f32 model, whose views must
  // outlive this); nothing is packed before Pack.
  explicit PackedLinear(const ForwardWeights& model);

  // Packs the weights' current values for ctx's ISA tier.
  void Pack(const kernels::KernelCtx& ctx);
  int64_t bytes() const;

  // y (+)= x · w for one of the model's layer weights `w` (looked up by address).
  void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const float* x,
               const float* w, float* y, bool accumulate) const override;
  void BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                    const float* dy, const float* w, float* dx) const override;
  void BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                      const float* x, const float* dy, float* dw) const override;
  bool HeadLogits(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                  const float* xn, const float* lm_head, float* logits) const override;

 private:
  const ForwardWeights& model_;
  std::unordered_map<const float*, kernels::PackedB> layers_;
  kernels::PackedB head_;
};

}  // namespace anvil::model
