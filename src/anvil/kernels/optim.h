// Fused AdamW update over flat f32 buffers (param, grad, m, v), optionally
// scaling the gradient (clipping by global norm) and writing a bf16 copy of
// the new weights in the same pass. Elementwise: any thread split gives the
// same bits, and every tier gives the same bits (only correctly rounded ops
// and explicit FMAs; compiled with -ffp-contract=off).
//
// Formula order: PyTorch's torch.optim.AdamW (single-tensor, non-fused path,
// amsgrad=False, maximize=False) in f32, its Python-double scalars rounded
// to f32 once per call, as ATen does:
//   decay = f32(1 - lr * wd)          w1 = f32(1 - beta1)     b2 = f32(beta2)
//   w2 = f32(1 - beta2)               eps = f32(eps)
//   step_size = f32(-(lr / (1 - beta1^step)))   bc2_sqrt = f32(sqrt(1 - beta2^step))
// per element (every operation rounded to f32; fma rounds once):
//   g = grad * grad_scale
//   p = p * decay                                  param.mul_(1 - lr*wd)
//   m = w1 < 0.5 ? fma(w1, g - m, m)               exp_avg.lerp_(grad, 1 - beta1)
//                : fma(w1 - 1, g - m, g)           (ATen's vectorized lerp)
//   v = v * b2 + (w2 * g) * g                      exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2)
//   p = p + (step_size * m) / (sqrt(v) / bc2_sqrt + eps)   param.addcdiv_(m, denom, -step_size)
//   p_bf16 = RNE(p)                                (optional)
// The one place a PyTorch build may differ: its compiler may contract
// addcmul's `v + (w2*g)*g` into an FMA; here it is two roundings.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

struct AdamWHyper {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// One step (`step` >= 1 counts this update, as PyTorch's state["step"] after
// its increment) over n elements. grad is read only. param_bf16 may be null.
void AdamWUpdate(const KernelCtx& ctx, const AdamWHyper& hyper, int64_t step, float grad_scale,
                 int64_t n, float* param, const float* grad, float* m, float* v, BF16* param_bf16);

}  // namespace anvil::kernels
