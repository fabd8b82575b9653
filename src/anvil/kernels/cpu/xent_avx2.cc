// Cross-entropy, AVX2 tier: xent_impl.h at width 8.
#include "anvil/kernels/cpu/xent_impl.h"

namespace anvil::kernels::xent_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::xent::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::xent_internal
