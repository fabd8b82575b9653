// AdamW, AVX2 tier: optim_impl.h at width 8.
#include "anvil/kernels/cpu/optim_impl.h"

namespace anvil::kernels::optim_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::optim::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::optim_internal
