// AVX-512 tier: attention_impl.h over F32x16. Compiled with the AVX-512 flags
// (anvil_isa_source); called only after the dispatcher's run-time ISA check.
#include "anvil/kernels/cpu/attention_decode_impl.h"
#include "anvil/kernels/cpu/attention_impl.h"

namespace anvil::kernels::attention_internal {

using ANVIL_SIMD_NS::F32x16;

void FwdTileAvx512(const FwdTile& tile, const FwdScratch& scratch) {
  ANVIL_SIMD_NS::attention::ForwardTile<F32x16>(tile, scratch);
}

void DecodeTileAvx512(const FwdTile& tile, const DecodeScratch& scratch) {
  ANVIL_SIMD_NS::attention::DecodeTile<F32x16>(tile, scratch);
}

void BwdUnitAvx512(const BwdUnit& unit, const BwdScratch& scratch) {
  ANVIL_SIMD_NS::attention::BackwardUnit<F32x16>(unit, scratch);
}

void Exp2Avx512(const float* x, float* y, int64_t n) {
  ANVIL_SIMD_NS::attention::Exp2Array<F32x16>(x, y, n);
}

}  // namespace anvil::kernels::attention_internal
