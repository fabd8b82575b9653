// FP8 quantization, AVX2 tier: quant_impl.h at width 8.
#include "anvil/kernels/cpu/quant_impl.h"

namespace anvil::kernels::quant_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::quant::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::quant_internal
