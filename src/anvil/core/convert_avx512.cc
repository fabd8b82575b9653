// AVX-512 (F/BW/VL/DQ) bulk conversions, 16 lanes at a time with masked tails:
// integer formulations of the scalar rules in convert.h, lane for lane.

#include "anvil/core/convert.h"
#include "anvil/core/convert_internal.h"
#include "anvil/core/intrinsics.h"

// Not used: AVX512_BF16's vcvtneps2bf16. It flushes subnormal inputs and
// outputs to zero and keeps NaN sign and payload, so its bits differ from
// F32ToBF16 (checked on an AMD EPYC Zen core: 0x00400000 -> 0x0000, not 0x0040).

namespace anvil::convert_internal {
namespace {

constexpr int kLanes = 16;

__mmask16 TailMask(size_t n) { return static_cast<__mmask16>((1u << n) - 1u); }

// ---- f32 -> bf16 ----

__m256i F32ToBF16x16(__m512i u) {
  const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
  r = _mm512_srli_epi32(r, 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FFF));
  return _mm512_cvtepi32_epi16(r);
}

void F32ToBF16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i r = F32ToBF16x16(_mm512_loadu_si512(src + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), r);
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, F32ToBF16x16(_mm512_maskz_loadu_epi32(m, src + i)));
  }
}

void BF16ToF32(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_si512(dst + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, src + i);
    _mm512_mask_storeu_epi32(dst + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// ---- f16 (F16C semantics: exact RNE with subnormals; NaNs fixed up to CUDA's) ----

__m256i F32ToF16x16(__m512 v) {
  __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm256_mask_mov_epi16(h, nan, _mm256_set1_epi16(0x7FFF));
}

void F32ToF16(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), F32ToF16x16(_mm512_loadu_ps(src + i)));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, F32ToF16x16(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

__m512 F16ToF32x16(__m256i h) {
  const __m512 v = _mm512_cvtph_ps(h);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(v, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF)));
}

void F16ToF32(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    _mm512_storeu_ps(dst + i,
                     F16ToF32x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, F16ToF32x16(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

// ---- f32 -> fp8: RoundMagnitude<kMan, kBias> of convert.h, vectorised ----

template <int kMan, int kBias>
__m512i RoundMagnitudeX16(__m512i a) {
  constexpr int kMinNormalExp = 127 - kBias + 1;
  const __m512i e = _mm512_srli_epi32(a, 23);
  const __mmask16 normal = _mm512_cmpge_epu32_mask(e, _mm512_set1_epi32(kMinNormalExp));
  const __m512i m_normal = _mm512_sub_epi32(a, _mm512_set1_epi32((127 - kBias) << 23));
  const __m512i m_sub = _mm512_or_si512(_mm512_and_si512(a, _mm512_set1_epi32(0x7FFFFF)),
                                        _mm512_set1_epi32(0x800000));
  // Signed min: for normal lanes the difference is negative but unused.
  const __m512i shift_sub = _mm512_min_epi32(
      _mm512_sub_epi32(_mm512_set1_epi32(151 - kMan - kBias), e), _mm512_set1_epi32(25));
  const __m512i m = _mm512_mask_mov_epi32(m_sub, normal, m_normal);
  const __m512i shift = _mm512_mask_mov_epi32(shift_sub, normal, _mm512_set1_epi32(23 - kMan));
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i half_minus_one =
      _mm512_sub_epi32(_mm512_sllv_epi32(one, _mm512_sub_epi32(shift, one)), one);
  const __m512i odd = _mm512_and_si512(_mm512_srlv_epi32(m, shift), one);
  return _mm512_srlv_epi32(_mm512_add_epi32(_mm512_add_epi32(m, half_minus_one), odd), shift);
}

// kOverflowGe: whether `a == kOverflowBits` already overflows (e5m2) or not (e4m3).
template <int kMan, int kBias, uint32_t kOverflowBits, bool kOverflowGe, int kSatValue,
          int kNoSatValue>
__m128i F32ToFp8x16(__m512i u, Overflow overflow) {
  const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  __m512i r = RoundMagnitudeX16<kMan, kBias>(a);
  const __m512i limit = _mm512_set1_epi32(static_cast<int>(kOverflowBits));
  const __mmask16 over =
      kOverflowGe ? _mm512_cmpge_epu32_mask(a, limit) : _mm512_cmpgt_epu32_mask(a, limit);
  const int over_value = overflow == Overflow::kSaturate ? kSatValue : kNoSatValue;
  r = _mm512_mask_mov_epi32(r, over, _mm512_set1_epi32(over_value));
  r = _mm512_or_si512(r, _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80)));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7F));
  return _mm512_cvtepi32_epi8(r);
}

template <int kMan, int kBias, uint32_t kOverflowBits, bool kOverflowGe, int kSatValue,
          int kNoSatValue>
void F32ToFp8(const float* src, uint8_t* dst, size_t n, Overflow overflow) {
  constexpr auto kConvert =
      F32ToFp8x16<kMan, kBias, kOverflowBits, kOverflowGe, kSatValue, kNoSatValue>;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     kConvert(_mm512_loadu_si512(src + i), overflow));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm_mask_storeu_epi8(dst + i, m, kConvert(_mm512_maskz_loadu_epi32(m, src + i), overflow));
  }
}

// ---- fp8 -> f32: normals by rebiasing, subnormals from a table, NaN fixed ----

struct alignas(64) Table16 {
  float v[16];
};

// Subnormal k * 2^(1-kBias-kMan) at index k < 2^kMan (0 at k = 0).
template <int kMan, int kBias>
constexpr Table16 MakeSubnormals() {
  Table16 t = {};
  for (int k = 0; k < (1 << kMan); ++k) {
    t.v[k] = static_cast<float>(k) / static_cast<float>(1u << (kBias - 1 + kMan));
  }
  return t;
}
template <int kMan, int kBias>
constexpr Table16 kSubnormals = MakeSubnormals<kMan, kBias>();

template <int kMan, int kBias, bool kHasInf>
__m512 Fp8ToF32x16(__m128i bytes) {
  const __m512i x = _mm512_cvtepu8_epi32(bytes);
  const __m512i mag = _mm512_and_si512(x, _mm512_set1_epi32(0x7F));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
  __m512i r =
      _mm512_add_epi32(_mm512_slli_epi32(mag, 23 - kMan), _mm512_set1_epi32((127 - kBias) << 23));
  const __mmask16 sub = _mm512_cmplt_epu32_mask(mag, _mm512_set1_epi32(1 << kMan));
  const __m512 table = _mm512_load_ps(kSubnormals<kMan, kBias>.v);
  r = _mm512_mask_mov_epi32(r, sub, _mm512_castps_si512(_mm512_permutexvar_ps(mag, table)));
  r = _mm512_or_si512(r, sign);
  const int inf_mag = kHasInf ? 0x7C : 0x80;  // e4m3 has no inf: no lane matches
  const int nan_min = kHasInf ? 0x7D : 0x7F;
  r = _mm512_mask_mov_epi32(r, _mm512_cmpeq_epi32_mask(mag, _mm512_set1_epi32(inf_mag)),
                            _mm512_or_si512(sign, _mm512_set1_epi32(0x7F800000)));
  r = _mm512_mask_mov_epi32(r, _mm512_cmpge_epi32_mask(mag, _mm512_set1_epi32(nan_min)),
                            _mm512_set1_epi32(0x7FFFFFFF));
  return _mm512_castsi512_ps(r);
}

template <int kMan, int kBias, bool kHasInf>
void Fp8ToF32(const uint8_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm512_storeu_ps(dst + i, Fp8ToF32x16<kMan, kBias, kHasInf>(b));
  }
  if (i < n) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(dst + i, m,
                          Fp8ToF32x16<kMan, kBias, kHasInf>(_mm_maskz_loadu_epi8(m, src + i)));
  }
}

}  // namespace

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = {
      .f32_to_bf16 = F32ToBF16,
      .bf16_to_f32 = BF16ToF32,
      .f32_to_f16 = F32ToF16,
      .f16_to_f32 = F16ToF32,
      // 464.0f = 0x43E80000 ties down to 448; 61440.0f = 0x47700000 ties up to inf.
      .f32_to_e4m3 = F32ToFp8<3, 7, 0x43E80000u, false, 0x7E, 0x7F>,
      .e4m3_to_f32 = Fp8ToF32<3, 7, false>,
      .f32_to_e5m2 = F32ToFp8<2, 15, 0x47700000u, true, 0x7B, 0x7C>,
      .e5m2_to_f32 = Fp8ToF32<2, 15, true>,
  };
  return kKernels;
}

}  // namespace anvil::convert_internal
