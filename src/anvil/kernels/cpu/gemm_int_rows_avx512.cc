// AVX-512 tier of the integer GEMM's activation rows (gemm_int_internal.h's
// RowQuantizer): 16 values a vector; a code is vcvtps2dq of the clamped
// product (round to nearest even, as nearbyint in the default mode), then
// vpmovdb (every code fits a byte).
#include <cstdint>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

// Lanes [0, n) of 16 (n may be negative or past 16).
__mmask16 Mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF)
                 : static_cast<__mmask16>(n <= 0 ? 0 : (1u << n) - 1);
}

// On |x|'s bits (the sign cleared) the integer order is the float order, with
// infinities and NaNs above every finite value: one integer max finds both.
float Amax(const float* x, int64_t k) {
  __m512i m = _mm512_setzero_si512();
  const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t i = 0; i < k; i += 16) {
    const __m512i bits = _mm512_castps_si512(_mm512_maskz_loadu_ps(Mask(k - i), x + i));
    m = _mm512_max_epu32(m, _mm512_and_si512(bits, abs));
  }
  const uint32_t top = static_cast<uint32_t>(_mm512_reduce_max_epu32(m));
  return top >= 0x7F800000u ? __builtin_nanf("") : __builtin_bit_cast(float, top);
}

void Encode(const float* x, int64_t k, int64_t ld, float inv, int8_t* q, uint8_t* q_u8,
            int32_t* sums) {
  const __m512 scale = _mm512_set1_ps(inv);
  const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
  const __m128i offset = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t g0 = 0; g0 < ld; g0 += kRowGroup) {
    __m512i sum = _mm512_setzero_si512();
    for (int64_t i = g0; i < g0 + kRowGroup && i < ld; i += 16) {
      const __m512 y = _mm512_mul_ps(_mm512_maskz_loadu_ps(Mask(k - i), x + i), scale);
      const __m512i code = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(y, lo), hi));
      const __m128i bytes = _mm512_cvtepi32_epi8(code);
      if (q != nullptr) _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), bytes);
      if (q_u8 != nullptr) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q_u8 + i), _mm_xor_si128(bytes, offset));
      }
      sum = _mm512_add_epi32(sum, code);
    }
    if (g0 < k) sums[g0 / kRowGroup] = _mm512_reduce_add_epi32(sum);
  }
}

}  // namespace

const RowQuantizer& Avx512RowQuantizer() {
  static constexpr RowQuantizer kQuantizer = {Amax, Encode};
  return kQuantizer;
}

}  // namespace anvil::kernels::gemm_int_internal
