// FP8 quantization, AVX-512 tier: quant_impl.h at width 16.
#include "anvil/kernels/cpu/quant_impl.h"

namespace anvil::kernels::quant_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::quant::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::quant_internal
