// Portable tier: attention_impl.h over F32x1 (one float per "vector"), compiled
// for the baseline ISA.
#include "anvil/kernels/cpu/attention_decode_impl.h"
#include "anvil/kernels/cpu/attention_impl.h"

namespace anvil::kernels::attention_internal {

using ANVIL_SIMD_NS::F32x1;

void FwdTileScalar(const FwdTile& tile, const FwdScratch& scratch) {
  ANVIL_SIMD_NS::attention::ForwardTile<F32x1>(tile, scratch);
}

void DecodeTileScalar(const FwdTile& tile, const DecodeScratch& scratch) {
  ANVIL_SIMD_NS::attention::DecodeTile<F32x1>(tile, scratch);
}

void BwdUnitScalar(const BwdUnit& unit, const BwdScratch& scratch) {
  ANVIL_SIMD_NS::attention::BackwardUnit<F32x1>(unit, scratch);
}

void Exp2Scalar(const float* x, float* y, int64_t n) {
  ANVIL_SIMD_NS::attention::Exp2Array<F32x1>(x, y, n);
}

}  // namespace anvil::kernels::attention_internal
