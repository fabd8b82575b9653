// RoPE, AVX2 tier: rope_impl.h at width 8.
#include "anvil/kernels/cpu/rope_impl.h"

namespace anvil::kernels::rope_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::rope::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::rope_internal
