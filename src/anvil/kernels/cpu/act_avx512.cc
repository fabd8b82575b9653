// SwiGLU, AVX-512 tier: act_impl.h at width 16.
#include "anvil/kernels/cpu/act_impl.h"

namespace anvil::kernels::act_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::act::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::act_internal
