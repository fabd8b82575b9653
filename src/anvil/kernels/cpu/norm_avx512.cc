// RMSNorm, AVX-512 tier: norm_impl.h at width 16.
#include "anvil/kernels/cpu/norm_impl.h"

namespace anvil::kernels::norm_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::norm::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::norm_internal
