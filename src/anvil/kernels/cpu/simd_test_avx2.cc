// Test-only: simd.h at width 8, compiled for AVX2 (see simd_test_probe.h).
#include "anvil/kernels/cpu/simd.h"
#include "anvil/kernels/cpu/simd_test_probe.h"

namespace anvil::kernels::simd_testing {

const Probe& Avx2Probe() {
  static constexpr Probe kProbe = ANVIL_SIMD_NS::probe::MakeProbe<ANVIL_SIMD_NS::F32x8>();
  return kProbe;
}

}  // namespace anvil::kernels::simd_testing
