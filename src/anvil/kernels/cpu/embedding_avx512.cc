// Embedding, AVX-512 tier: embedding_impl.h at width 16.
#include "anvil/kernels/cpu/embedding_impl.h"

namespace anvil::kernels::embedding_internal {

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels =
      ANVIL_SIMD_NS::embedding::MakeKernels<ANVIL_SIMD_NS::F32x16>();
  return kKernels;
}

}  // namespace anvil::kernels::embedding_internal
