// SwiGLU, AVX2 tier: act_impl.h at width 8.
#include "anvil/kernels/cpu/act_impl.h"

namespace anvil::kernels::act_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::act::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::act_internal
