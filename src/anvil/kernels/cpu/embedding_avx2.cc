// Embedding, AVX2 tier: embedding_impl.h at width 8.
#include "anvil/kernels/cpu/embedding_impl.h"

namespace anvil::kernels::embedding_internal {

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::embedding::MakeKernels<ANVIL_SIMD_NS::F32x8>();
  return kKernels;
}

}  // namespace anvil::kernels::embedding_internal
