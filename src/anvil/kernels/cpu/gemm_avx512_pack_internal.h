// What the packers of the AVX-512 GEMM unit share (cpu/gemm_avx512_pack.cc,
// and the AVX512_VBMI FP8 packer cpu/gemm_avx512_fp8_pack.cc): a 16 x 16
// transpose of 32-bit lanes and the FP8 decode's rounding. Include only from
// files built for AVX-512; the functions have internal linkage, so each
// file, whatever its flags, keeps its own copy and none is shared across ISA
// flags.
#pragma once

#include <cstdint>

#include "anvil/core/intrinsics.h"

namespace anvil::kernels::gemm_internal::avx512 {
// Internal linkage on purpose (see above): a copy per file and ISA flags.
namespace {  // NOLINT(build/namespaces)

// In-place transpose of 16 rows of 16 32-bit lanes: v[i] lane j <- v[j] lane i.
[[gnu::always_inline]] inline void Transpose16x16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // u[4g + c], 128-bit lane L: rows 4g..4g+3 at column 4L + c.
  __m512 u[16];
  for (int g = 0; g < 4; ++g) {
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    u[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    v[c] = _mm512_shuffle_f32x4(v0, w0, 0x88);
    v[8 + c] = _mm512_shuffle_f32x4(v0, w0, 0xDD);
    v[4 + c] = _mm512_shuffle_f32x4(v1, w1, 0x88);
    v[12 + c] = _mm512_shuffle_f32x4(v1, w1, 0xDD);
  }
}

// f32 -> bf16 bits, round to nearest even, NaN -> 0x7FFF (gemm_fp8.h's Bf16),
// in the low halves of the 32-bit lanes.
inline __m512i Bf16Bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FFF));
}

// 2^(e - 127) for an E8M0 code (0: 2^-127; 0xFF: NaN), as gemm_fp8.h's Pow2.
inline float Pow2(uint8_t e) {
  const uint32_t u = e == 0xFF ? 0x7FC00000u : (e == 0 ? 0x00400000u : uint32_t{e} << 23);
  return __builtin_bit_cast(float, u);
}

}  // namespace
}  // namespace anvil::kernels::gemm_internal::avx512
