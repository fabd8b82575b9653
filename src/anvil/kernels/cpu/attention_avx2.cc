// AVX2 + FMA tier: attention_impl.h over F32x8. Compiled with the AVX2 flags
// (anvil_isa_source); called only after the dispatcher's run-time ISA check.
#include "anvil/kernels/cpu/attention_decode_impl.h"
#include "anvil/kernels/cpu/attention_impl.h"

namespace anvil::kernels::attention_internal {

using ANVIL_SIMD_NS::F32x8;

void FwdTileAvx2(const FwdTile& tile, const FwdScratch& scratch) {
  ANVIL_SIMD_NS::attention::ForwardTile<F32x8>(tile, scratch);
}

void DecodeTileAvx2(const FwdTile& tile, const DecodeScratch& scratch) {
  ANVIL_SIMD_NS::attention::DecodeTile<F32x8>(tile, scratch);
}

void BwdUnitAvx2(const BwdUnit& unit, const BwdScratch& scratch) {
  ANVIL_SIMD_NS::attention::BackwardUnit<F32x8>(unit, scratch);
}

void Exp2Avx2(const float* x, float* y, int64_t n) {
  ANVIL_SIMD_NS::attention::Exp2Array<F32x8>(x, y, n);
}

}  // namespace anvil::kernels::attention_internal
