// AdamW: argument checks, the f32 scalars (from double, as PyTorch rounds its
// Python floats), the tier dispatch and the element split, plus the portable
// tier (F32x1).
#include "anvil/kernels/optim.h"

#include <cmath>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/optim_impl.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace optim_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::optim::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace optim_internal

namespace {

const optim_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, optim_internal::ScalarKernels,
                                          optim_internal::Avx2Kernels,
                                          optim_internal::Avx512Kernels);
}

}  // namespace

void AdamWUpdate(const KernelCtx& ctx, const AdamWHyper& hyper, int64_t step, float grad_scale,
                 int64_t n, float* param, const float* grad, float* m, float* v, BF16* param_bf16) {
  ANVIL_TRACE_ZONE("adamw_update");
  CHECK_GE(n, 0) << "AdamW: n must be >= 0";
  CHECK_GE(step, 1) << "AdamW: step counts this update and starts at 1";
  CHECK(hyper.beta1 >= 0 && hyper.beta1 < 1) << "AdamW: beta1 must be in [0, 1)";
  CHECK(hyper.beta2 >= 0 && hyper.beta2 < 1) << "AdamW: beta2 must be in [0, 1)";
  CHECK(hyper.lr >= 0 && hyper.eps >= 0 && hyper.weight_decay >= 0)
      << "AdamW: lr, eps and weight_decay must be >= 0";
  CHECK(n == 0 || (param != nullptr && grad != nullptr && m != nullptr && v != nullptr))
      << "AdamW: param, grad, m and v must be non-null";
  const double bc1 = 1 - std::pow(hyper.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(hyper.beta2, static_cast<double>(step));
  const optim_internal::Args args{.grad_scale = grad_scale,
                                  .decay = static_cast<float>(1 - hyper.lr * hyper.weight_decay),
                                  .w1 = static_cast<float>(1 - hyper.beta1),
                                  .b2 = static_cast<float>(hyper.beta2),
                                  .w2 = static_cast<float>(1 - hyper.beta2),
                                  .eps = static_cast<float>(hyper.eps),
                                  .step_size = static_cast<float>(-(hyper.lr / bc1)),
                                  .bc2_sqrt = static_cast<float>(std::sqrt(bc2)),
                                  .param = param,
                                  .grad = grad,
                                  .m = m,
                                  .v = v,
                                  .param_bf16 = param_bf16};
  const auto fn = KernelsFor(ctx.isa()).update;
  constexpr int64_t kBlock = optim_internal::kBlock;
  rowwise_internal::ParallelFor(ctx, (n + kBlock - 1) / kBlock,
                                [&](int64_t begin, int64_t end, int) {
                                  fn(args, begin * kBlock, end * kBlock < n ? end * kBlock : n);
                                });
}

}  // namespace anvil::kernels
