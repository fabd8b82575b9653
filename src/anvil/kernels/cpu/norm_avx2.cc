// RMSNorm, AVX2 tier: norm_impl.h at width 8.
#include "anvil/kernels/cpu/norm_impl.h"

namespace anvil::kernels::norm_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::norm::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::norm_internal
