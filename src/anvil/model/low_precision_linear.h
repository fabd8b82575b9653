// A linear layer's GEMMs in another form than the model's plain ones: the
// FP8 training recipes (fp8_linear.h), integer inference (int_linear.h) and
// f32 or bf16 weights packed once for decoding (packed_linear.h). The model's
// Linear* helpers (ops.h) hand a layer's GEMM to one when the blocks' scratch
// carries it; weights are [in, out] as the model holds them (f32, or its
// bf16 copy for the bf16 entry points).
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::model {

class LowPrecisionLinear {
 public:
  virtual ~LowPrecisionLinear() = default;
  // y[n, out] (+)= x[n, in] · w[in, out].
  virtual void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                       const float* x, const float* w, float* y, bool accumulate) const = 0;
  // dx[n, in] = dy[n, out] · w[in, out]ᵀ.
  virtual void BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                            const float* dy, const float* w, float* dx) const = 0;
  // dw[in, out] += x[n, in]ᵀ · dy[n, out].
  virtual void BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                              const float* x, const float* dy, float* dw) const = 0;
  // The LM head's logits[n, vocab] = xn[n, dim] · lm_head[vocab, dim]ᵀ, for a
  // form that runs the head as well; false: it does not (the model's own
  // GEMM runs it).
  virtual bool HeadLogits(const kernels::KernelCtx& /*ctx*/, int64_t /*n*/, int64_t /*dim*/,
                          int64_t /*vocab*/, const float* /*xn*/, const float* /*lm_head*/,
                          float* /*logits*/) const {
    return false;
  }

  // A bf16 model's decode (PackedLinear over its bf16 copy): whether this
  // form takes bf16 activations, and its forward GEMMs for them (x and w
  // bf16, w the model's bf16 weight; y f32 or bf16) and LM head; false: it
  // does not (the model's own GEMM runs it).
  virtual bool TakesBf16() const { return false; }
  virtual bool ForwardBf16(const kernels::KernelCtx& /*ctx*/, int64_t /*n*/, int64_t /*in*/,
                           int64_t /*out*/, const BF16* /*x*/, const BF16* /*w*/, float* /*y*/,
                           bool /*accumulate*/) const {
    return false;
  }
  virtual bool ForwardBf16(const kernels::KernelCtx& /*ctx*/, int64_t /*n*/, int64_t /*in*/,
                           int64_t /*out*/, const BF16* /*x*/, const BF16* /*w*/, BF16* /*y*/,
                           bool /*accumulate*/) const {
    return false;
  }
  virtual bool HeadLogitsBf16(const kernels::KernelCtx& /*ctx*/, int64_t /*n*/, int64_t /*dim*/,
                              int64_t /*vocab*/, const BF16* /*xn*/, const BF16* /*lm_head*/,
                              float* /*logits*/) const {
    return false;
  }
};

}  // namespace anvil::model
