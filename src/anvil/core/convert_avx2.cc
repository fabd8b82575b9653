// AVX2 (+F16C) bulk conversions, 8 lanes at a time: integer formulations of
// the scalar rules in convert.h, lane for lane. The tail runs one vector over a
// zero-padded copy, so it gives the same bits as the body.
#include <cstring>

#include "anvil/core/convert.h"
#include "anvil/core/convert_internal.h"
#include "anvil/core/intrinsics.h"

// AVX2 has only signed compares; every compared value here is below 2^31.

namespace anvil::convert_internal {
namespace {

constexpr size_t kLanes = 8;

// Applies `block` (kLanes in -> kLanes out) over n elements.
template <typename From, typename To, typename Block>
void Blocks(const From* src, To* dst, size_t n, Block block) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) block(src + i, dst + i);
  if (i < n) {
    From in[kLanes] = {};
    To out[kLanes];
    std::memcpy(in, src + i, (n - i) * sizeof(From));
    block(in, out);
    std::memcpy(dst + i, out, (n - i) * sizeof(To));
  }
}

__m256i Set1(int x) { return _mm256_set1_epi32(x); }

// 8 x i32 holding values <= 0xFFFF -> 8 x u16.
__m128i Narrow16(__m256i r) {
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

// ---- bf16 ----

void F32ToBF16(const float* src, uint16_t* dst, size_t n) {
  Blocks(src, dst, n, [](const float* in, uint16_t* out) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
    const __m256i a = _mm256_and_si256(u, Set1(0x7FFFFFFF));
    const __m256i nan = _mm256_cmpgt_epi32(a, Set1(0x7F800000));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), Set1(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, Set1(0x7FFF))), 16);
    r = _mm256_blendv_epi8(r, Set1(0x7FFF), nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), Narrow16(r));
  });
}

void BF16ToF32(const uint16_t* src, float* dst, size_t n) {
  Blocks(src, dst, n, [](const uint16_t* in, float* out) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), u);
  });
}

// ---- f16 (F16C: exact RNE with subnormals; NaNs fixed up to CUDA's) ----

void F32ToF16(const float* src, uint16_t* dst, size_t n) {
  Blocks(src, dst, n, [](const float* in, uint16_t* out) {
    const __m256 v = _mm256_loadu_ps(in);
    const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m128i nan16 =
        _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm_blendv_epi8(h, _mm_set1_epi16(0x7FFF), nan16));
  });
}

void F16ToF32(const uint16_t* src, float* dst, size_t n) {
  Blocks(src, dst, n, [](const uint16_t* in, float* out) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(out, _mm256_blendv_ps(v, _mm256_castsi256_ps(Set1(0x7FFFFFFF)), nan));
  });
}

// ---- f32 -> fp8: RoundMagnitude<kMan, kBias> of convert.h, vectorised ----

template <int kMan, int kBias>
__m256i RoundMagnitudeX8(__m256i a) {
  constexpr int kMinNormalExp = 127 - kBias + 1;
  const __m256i e = _mm256_srli_epi32(a, 23);
  const __m256i normal = _mm256_cmpgt_epi32(e, Set1(kMinNormalExp - 1));
  const __m256i m_normal = _mm256_sub_epi32(a, Set1((127 - kBias) << 23));
  const __m256i m_sub = _mm256_or_si256(_mm256_and_si256(a, Set1(0x7FFFFF)), Set1(0x800000));
  // For normal lanes the difference is negative but unused.
  const __m256i shift_sub =
      _mm256_min_epi32(_mm256_sub_epi32(Set1(151 - kMan - kBias), e), Set1(25));
  const __m256i m = _mm256_blendv_epi8(m_sub, m_normal, normal);
  const __m256i shift = _mm256_blendv_epi8(shift_sub, Set1(23 - kMan), normal);
  const __m256i one = Set1(1);
  const __m256i half_minus_one =
      _mm256_sub_epi32(_mm256_sllv_epi32(one, _mm256_sub_epi32(shift, one)), one);
  const __m256i odd = _mm256_and_si256(_mm256_srlv_epi32(m, shift), one);
  return _mm256_srlv_epi32(_mm256_add_epi32(_mm256_add_epi32(m, half_minus_one), odd), shift);
}

// kOverflowGe: whether `a == kOverflowBits` already overflows (e5m2) or not (e4m3).
template <int kMan, int kBias, int kOverflowBits, bool kOverflowGe, int kSatValue, int kNoSatValue>
void F32ToFp8(const float* src, uint8_t* dst, size_t n, Overflow overflow) {
  const __m256i over_value = Set1(overflow == Overflow::kSaturate ? kSatValue : kNoSatValue);
  Blocks(src, dst, n, [over_value](const float* in, uint8_t* out) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
    const __m256i a = _mm256_and_si256(u, Set1(0x7FFFFFFF));
    __m256i r = RoundMagnitudeX8<kMan, kBias>(a);
    const __m256i over =
        _mm256_cmpgt_epi32(a, Set1(kOverflowGe ? kOverflowBits - 1 : kOverflowBits));
    r = _mm256_blendv_epi8(r, over_value, over);
    r = _mm256_or_si256(r, _mm256_and_si256(_mm256_srli_epi32(u, 24), Set1(0x80)));
    r = _mm256_blendv_epi8(r, Set1(0x7F), _mm256_cmpgt_epi32(a, Set1(0x7F800000)));
    const __m128i r16 = Narrow16(r);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(r16, r16));
  });
}

// ---- fp8 -> f32: normals by rebiasing, subnormals from a table, NaN fixed ----

struct alignas(32) Table8 {
  float v[8];
};

// Subnormal k * 2^(1-kBias-kMan) at index k < 2^kMan (0 at k = 0).
template <int kMan, int kBias>
constexpr Table8 MakeSubnormals() {
  Table8 t = {};
  for (int k = 0; k < (1 << kMan); ++k) {
    t.v[k] = static_cast<float>(k) / static_cast<float>(1u << (kBias - 1 + kMan));
  }
  return t;
}
template <int kMan, int kBias>
constexpr Table8 kSubnormals = MakeSubnormals<kMan, kBias>();

template <int kMan, int kBias, bool kHasInf>
void Fp8ToF32(const uint8_t* src, float* dst, size_t n) {
  Blocks(src, dst, n, [](const uint8_t* in, float* out) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in)));
    const __m256i mag = _mm256_and_si256(x, Set1(0x7F));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, Set1(0x80)), 24);
    __m256i r = _mm256_add_epi32(_mm256_slli_epi32(mag, 23 - kMan), Set1((127 - kBias) << 23));
    const __m256i sub = _mm256_cmpgt_epi32(Set1(1 << kMan), mag);
    const __m256 table = _mm256_load_ps(kSubnormals<kMan, kBias>.v);
    r = _mm256_blendv_epi8(r, _mm256_castps_si256(_mm256_permutevar8x32_ps(table, mag)), sub);
    r = _mm256_or_si256(r, sign);
    if constexpr (kHasInf) {
      const __m256i inf = _mm256_cmpeq_epi32(mag, Set1(0x7C));
      r = _mm256_blendv_epi8(r, _mm256_or_si256(sign, Set1(0x7F800000)), inf);
    }
    const __m256i nan = _mm256_cmpgt_epi32(mag, Set1(kHasInf ? 0x7C : 0x7E));
    r = _mm256_blendv_epi8(r, Set1(0x7FFFFFFF), nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), r);
  });
}

}  // namespace

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = {
      .f32_to_bf16 = F32ToBF16,
      .bf16_to_f32 = BF16ToF32,
      .f32_to_f16 = F32ToF16,
      .f16_to_f32 = F16ToF32,
      // 464.0f = 0x43E80000 ties down to 448; 61440.0f = 0x47700000 ties up to inf.
      .f32_to_e4m3 = F32ToFp8<3, 7, 0x43E80000, false, 0x7E, 0x7F>,
      .e4m3_to_f32 = Fp8ToF32<3, 7, false>,
      .f32_to_e5m2 = F32ToFp8<2, 15, 0x47700000, true, 0x7B, 0x7C>,
      .e5m2_to_f32 = Fp8ToF32<2, 15, true>,
  };
  return kKernels;
}

}  // namespace anvil::convert_internal
