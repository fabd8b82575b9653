// Cross-entropy, AVX-512 tier: xent_impl.h at width 16.
#include "anvil/kernels/cpu/xent_impl.h"

namespace anvil::kernels::xent_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::xent::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::xent_internal
