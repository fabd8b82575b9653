// AVX2 tier of the integer GEMM's activation rows (gemm_int_internal.h's
// RowQuantizer): 8 values a vector; a code is vcvtps2dq of the clamped
// product (round to nearest even, as nearbyint in the default mode), and
// four vectors pack to 32 bytes (saturating packs: every code fits).
#include <cstdint>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

// Lanes [0, n) of 8 set (n may be negative or past 8).
__m256i Mask(int64_t n) {
  const int64_t c = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(c)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// On |x|'s bits (the sign cleared) the integer order is the float order, with
// infinities and NaNs above every finite value: one integer max finds both.
float Amax(const float* x, int64_t k) {
  __m256i m = _mm256_setzero_si256();
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  for (int64_t i = 0; i < k; i += 8) {
    const __m256i bits = _mm256_castps_si256(_mm256_maskload_ps(x + i, Mask(k - i)));
    m = _mm256_max_epu32(m, _mm256_and_si256(bits, abs));
  }
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
  uint32_t top = 0;
  for (const uint32_t v : lanes) top = v > top ? v : top;
  return top >= 0x7F800000u ? __builtin_nanf("") : __builtin_bit_cast(float, top);
}

void Encode(const float* x, int64_t k, int64_t ld, float inv, int8_t* q, uint8_t* q_u8,
            int32_t* sums) {
  const __m256 scale = _mm256_set1_ps(inv);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
  // packs interleave the 128-bit lanes: this puts the 32 codes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  auto codes = [&](int64_t i) {
    const __m256 y = _mm256_mul_ps(_mm256_maskload_ps(x + i, Mask(k - i)), scale);
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(y, lo), hi));
  };
  for (int64_t g0 = 0; g0 < ld; g0 += kRowGroup) {
    __m256i sum = _mm256_setzero_si256();
    for (int64_t i = g0; i < g0 + kRowGroup && i < ld; i += 32) {
      const __m256i c0 = codes(i), c1 = codes(i + 8), c2 = codes(i + 16), c3 = codes(i + 24);
      const __m256i bytes = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(c0, c1), _mm256_packs_epi32(c2, c3)), order);
      if (q != nullptr) _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), bytes);
      if (q_u8 != nullptr) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(q_u8 + i), _mm256_xor_si256(bytes, offset));
      }
      sum = _mm256_add_epi32(sum,
                             _mm256_add_epi32(_mm256_add_epi32(c0, c1), _mm256_add_epi32(c2, c3)));
    }
    if (g0 < k) {
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sum);
      int32_t total = 0;
      for (const int32_t v : lanes) total += v;
      sums[g0 / kRowGroup] = total;
    }
  }
}

}  // namespace

const RowQuantizer& Avx2RowQuantizer() {
  static constexpr RowQuantizer kQuantizer = {Amax, Encode};
  return kQuantizer;
}

}  // namespace anvil::kernels::gemm_int_internal
