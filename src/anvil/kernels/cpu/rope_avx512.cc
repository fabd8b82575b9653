// RoPE, AVX-512 tier: rope_impl.h at width 16.
#include "anvil/kernels/cpu/rope_impl.h"

namespace anvil::kernels::rope_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::rope::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::rope_internal
