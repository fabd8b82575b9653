// AdamW, AVX-512 tier: optim_impl.h at width 16.
#include "anvil/kernels/cpu/optim_impl.h"

namespace anvil::kernels::optim_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::optim::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::optim_internal
