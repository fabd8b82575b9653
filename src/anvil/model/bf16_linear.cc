// bf16 GEMMs over f32 activations and weights (bf16_linear.h).
#include "anvil/model/bf16_linear.h"

#include "anvil/core/check.h"
#include "anvil/kernels/gemm.h"
#include "anvil/model/ops.h"

namespace anvil::model {

const BF16* Bf16Linear::Round(const kernels::KernelCtx& ctx, const float* src, int64_t count,
                              BF16* dst, int64_t capacity) const {
  CHECK_LE(count, capacity) << "Bf16Linear: an operand of " << count << " values, sized for "
                            << capacity;
  ConvertTo(ctx, src, dst, count);
  return dst;
}

void Bf16Linear::Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                         const float* x, const float* w, float* y, bool accumulate) const {
  kernels::Gemm(ctx, {.m = n, .n = out, .k = in, .accumulate = accumulate},
                Round(ctx, x, n * in, a_, max_a_), Round(ctx, w, in * out, b_, max_b_), y);
}

void Bf16Linear::BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                              const float* dy, const float* w, float* dx) const {
  kernels::Gemm(ctx, {.m = n, .n = in, .k = out, .trans_b = kernels::Trans::kT},
                Round(ctx, dy, n * out, a_, max_a_), Round(ctx, w, in * out, b_, max_b_), dx);
}

void Bf16Linear::BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                                const float* x, const float* dy, float* dw) const {
  kernels::Gemm(ctx, {.m = in, .n = out, .k = n, .trans_a = kernels::Trans::kT, .accumulate = true},
                Round(ctx, x, n * in, a_, max_a_), Round(ctx, dy, n * out, b_, max_b_), dw);
}

}  // namespace anvil::model
