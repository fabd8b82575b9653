// FP8 quantization kernels, written once over the vector type V (simd.h) and
// instantiated per tier by quant.cc (F32x1), quant_avx2.cc and
// quant_avx512.cc: the amax reductions, the scaled copies and the fused
// scale-and-cast. The cast (round to nearest even, saturating, NaN -> 0x7F)
// is written here once in scalar bit arithmetic and once per vector width in
// the same steps; quant_test holds every tier to the oracle built on core's
// conversions (themselves exact against CUDA's cuda_fp8.h). The scale rules
// are scalar and live in quant.cc.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "anvil/kernels/cpu/simd.h"
#include "anvil/kernels/quant.h"

namespace anvil::kernels::quant_internal {

// One row's blocks: the scale rule and the format's constants.
struct RowQuant {
  int64_t block;
  BlockScale rule;
  bool e5m2;
  float fp8_max;
  int fp8_emax;
};

struct Kernels {
  // max |x[i]|, i < n; NaN when any x[i] is not finite.
  float (*amax)(const float* x, int64_t n);
  // amax[c] = max over r < rows of |x[r * ld + c]|, c < cols; NaN where a
  // column holds a non-finite value.
  void (*column_amax)(const float* x, int64_t ld, int64_t rows, int64_t cols, float* amax);
  // q[i] = fp8(x[i] / s) (divide) or fp8(x[i] * s), i < n: e5m2 or e4m3,
  // saturating.
  void (*scale_cast)(const float* x, int64_t n, float s, bool divide, bool e5m2, uint8_t* q);
  // q[r * cols + c] = fp8(x[r * ld + c] / s[c]) for r < rows, c < cols: a
  // block of rows with a scale per column.
  void (*divide_cast_columns)(const float* x, int64_t ld, int64_t rows, int64_t cols,
                              const float* s, bool e5m2, uint8_t* q);
  // One row of `cols` in blocks along it: each block's amax, scale (into
  // s_f32 or s_e8m0, one per block) and codes.
  void (*quantize_row)(const float* x, int64_t cols, const RowQuant& rq, uint8_t* q, float* s_f32,
                       uint8_t* s_e8m0);
  // out[c * ld + r] = codes[r * cols + c] for r < rows, c < cols: a block of
  // codes into rows of a transposed operand.
  void (*transpose_codes)(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out,
                          int64_t ld);
};

const Kernels& ScalarKernels();  // quant.cc
const Kernels& Avx2Kernels();    // quant_avx2.cc
const Kernels& Avx512Kernels();  // quant_avx512.cc

}  // namespace anvil::kernels::quant_internal

namespace anvil::kernels::ANVIL_SIMD_NS::quant {

// amax works on the bits: |x| is x's bits without the sign, and for those
// the integer order is the float order, with every infinity and NaN above
// all finite values. So one integer max gives the amax exactly and whether
// anything was not finite (>= 0x7F800000), in any order, on every tier.
inline constexpr uint32_t kAbsMask = 0x7FFFFFFFu;
inline constexpr uint32_t kInfBits = 0x7F800000u;
inline constexpr uint32_t kNaNBits = 0x7FC00000u;

inline float AmaxFromBits(uint32_t m) {
  return simd_detail::FromBits(m >= kInfBits ? kNaNBits : m);
}

// Max of |x[i]|'s bits over i < n (0 for n = 0).
template <typename V>
inline uint32_t MaxAbsBits(const float* x, int64_t n) {
  uint32_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t a = simd_detail::Bits(x[i]) & kAbsMask;
    m = a > m ? a : m;
  }
  return m;
}

// lanes[j] = max over r < rows of |x[r * ld + j]|'s bits, j < n <= kLanes.
template <typename V>
inline void ColumnMaxAbsBits(const float* x, int64_t ld, int64_t rows, int n, uint32_t* lanes) {
  for (int j = 0; j < n; ++j) lanes[j] = MaxAbsBits<V>(x + j, 1);
  for (int64_t r = 1; r < rows; ++r) {
    for (int j = 0; j < n; ++j) {
      const uint32_t a = simd_detail::Bits(x[r * ld + j]) & kAbsMask;
      lanes[j] = a > lanes[j] ? a : lanes[j];
    }
  }
}

#if ANVIL_SIMD_HAVE_AVX2
inline uint32_t ReduceMaxU32(__m256i m) {
  __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0x4E));
  h = _mm_max_epu32(h, _mm_shuffle_epi32(h, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(h));
}
template <>
inline uint32_t MaxAbsBits<F32x8>(const float* x, int64_t n) {
  const __m256i abs = _mm256_set1_epi32(static_cast<int>(kAbsMask));
  __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_epu32(
        m0, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)), abs));
    m1 = _mm256_max_epu32(
        m1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8)), abs));
  }
  for (; i < n; i += 8) {
    const int rest = static_cast<int>(n - i < 8 ? n - i : 8);
    const __m256i v =
        _mm256_maskload_epi32(reinterpret_cast<const int*>(x + i), F32x8::LaneMask(rest));
    m0 = _mm256_max_epu32(m0, _mm256_and_si256(v, abs));
  }
  return ReduceMaxU32(_mm256_max_epu32(m0, m1));
}
template <>
inline void ColumnMaxAbsBits<F32x8>(const float* x, int64_t ld, int64_t rows, int n,
                                    uint32_t* lanes) {
  const __m256i abs = _mm256_set1_epi32(static_cast<int>(kAbsMask));
  const __m256i mask = F32x8::LaneMask(n);
  __m256i m = _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; ++r) {
    const __m256i v = _mm256_maskload_epi32(reinterpret_cast<const int*>(x + r * ld), mask);
    m = _mm256_max_epu32(m, _mm256_and_si256(v, abs));
  }
  _mm256_maskstore_epi32(reinterpret_cast<int*>(lanes), mask, m);
}
#endif

#if ANVIL_SIMD_HAVE_AVX512
template <>
inline uint32_t MaxAbsBits<F32x16>(const float* x, int64_t n) {
  const __m512i abs = _mm512_set1_epi32(static_cast<int>(kAbsMask));
  __m512i m0 = _mm512_setzero_si512(), m1 = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), abs));
    m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 16), abs));
  }
  for (; i < n; i += 16) {
    const int rest = static_cast<int>(n - i < 16 ? n - i : 16);
    m0 = _mm512_max_epu32(
        m0, _mm512_and_si512(_mm512_maskz_loadu_epi32(F32x16::LaneMask(rest), x + i), abs));
  }
  return _mm512_reduce_max_epu32(_mm512_max_epu32(m0, m1));
}
template <>
inline void ColumnMaxAbsBits<F32x16>(const float* x, int64_t ld, int64_t rows, int n,
                                     uint32_t* lanes) {
  const __m512i abs = _mm512_set1_epi32(static_cast<int>(kAbsMask));
  const __mmask16 mask = F32x16::LaneMask(n);
  __m512i m = _mm512_setzero_si512();
  for (int64_t r = 0; r < rows; ++r) {
    m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(mask, x + r * ld), abs));
  }
  _mm512_mask_storeu_epi32(lanes, mask, m);
}
#endif

template <typename V>
float Amax(const float* x, int64_t n) {
  return AmaxFromBits(MaxAbsBits<V>(x, n));
}

template <typename V>
void ColumnAmax(const float* x, int64_t ld, int64_t rows, int64_t cols, float* amax) {
  constexpr int64_t L = V::kLanes;
  uint32_t lanes[L];
  for (int64_t c = 0; c < cols; c += L) {
    const int n = static_cast<int>(cols - c < L ? cols - c : L);
    ColumnMaxAbsBits<V>(x + c, ld, rows, n, lanes);
    for (int j = 0; j < n; ++j) amax[c + j] = AmaxFromBits(lanes[j]);
  }
}

// The fp8 encodings' constants (f32 bit patterns): E4M3 keeps 3 mantissa
// bits (drops 20), bias 7, normals from 2^-6, subnormal unit 2^-9, max 448;
// E5M2 keeps 2 (drops 21), bias 15, normals from 2^-14, unit 2^-16, max 57344.
struct Fp8Encoding {
  int dropped;          // f32 mantissa bits dropped
  uint32_t rebias;      // (127 - bias) << mantissa bits
  uint32_t min_normal;  // f32 bits of the smallest normal
  float subnormal_inv;  // 1 / subnormal unit (exact power of two)
  uint32_t max;         // f32 bits of the largest finite value
  uint32_t max_code;    // its code
};
inline constexpr Fp8Encoding kE4M3Encoding = {20,     120u << 3,   0x3C800000u,
                                              512.0f, 0x43E00000u, 0x7E};
inline constexpr Fp8Encoding kE5M2Encoding = {21,       112u << 2,   0x38800000u,
                                              65536.0f, 0x47600000u, 0x7B};
inline constexpr float kRoundToInteger =
    8388608.0f;  // 2^23: (t + 2^23) - 2^23 rounds t < 2^22 to even

// The cast of one value: sign | code. NaN -> 0x7F; |v| >= max (infinities
// too) -> max; normals round to nearest even by adding half an ulp (less one,
// plus the kept lowest bit) to the bits; subnormals are |v| / unit rounded to
// an integer (8 or 4, the smallest normal's code, where it rounds up).
inline uint8_t CastOne(float v, const Fp8Encoding& e) {
  const uint32_t bits = simd_detail::Bits(v);
  const uint32_t sign = (bits >> 24) & 0x80u, a = bits & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return 0x7F;
  uint32_t code;
  if (a >= e.max) {
    code = e.max_code;
  } else if (a >= e.min_normal) {
    const uint32_t r = a + ((1u << (e.dropped - 1)) - 1u) + ((a >> e.dropped) & 1u);
    code = (r >> e.dropped) - e.rebias;
  } else {
    const float t = simd_detail::FromBits(a) * e.subnormal_inv;
    code = static_cast<uint32_t>((t + kRoundToInteger) - kRoundToInteger);
  }
  return static_cast<uint8_t>(sign | code);
}

// n (<= kLanes) codes of v's lanes into q.
template <typename V>
inline void CastLanes(V v, const Fp8Encoding& e, uint8_t* q, int n) {
  float lanes[V::kLanes];
  v.Store(lanes);
  for (int j = 0; j < n; ++j) q[j] = CastOne(lanes[j], e);
}

#if ANVIL_SIMD_HAVE_AVX2
template <>
inline void CastLanes<F32x8>(F32x8 v, const Fp8Encoding& e, uint8_t* q, int n) {
  const __m256i bits = _mm256_castps_si256(v.v);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
  const __m256i a = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  const __m128i drop = _mm_cvtsi32_si128(e.dropped);
  const __m256i half =
      _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>((1u << (e.dropped - 1)) - 1u)),
                       _mm256_and_si256(_mm256_srl_epi32(a, drop), _mm256_set1_epi32(1)));
  const __m256i normal = _mm256_sub_epi32(_mm256_srl_epi32(_mm256_add_epi32(a, half), drop),
                                          _mm256_set1_epi32(static_cast<int>(e.rebias)));
  const __m256 magic = _mm256_set1_ps(kRoundToInteger);
  const __m256 t = _mm256_mul_ps(_mm256_castsi256_ps(a), _mm256_set1_ps(e.subnormal_inv));
  const __m256i sub = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(t, magic), magic));
  // a is below 2^31: signed compares order it. a >= k is a > k - 1.
  auto at_least = [&](uint32_t k) {
    return _mm256_cmpgt_epi32(a, _mm256_set1_epi32(static_cast<int>(k - 1)));
  };
  __m256i code = _mm256_blendv_epi8(sub, normal, at_least(e.min_normal));
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(static_cast<int>(e.max_code)), at_least(e.max));
  code = _mm256_or_si256(code, sign);
  code = _mm256_blendv_epi8(code, _mm256_set1_epi32(0x7F), at_least(0x7F800001u));
  // 8 x int32 (each < 256) -> 8 bytes.
  const __m256i w16 = _mm256_packus_epi32(code, code);
  const __m256i w8 = _mm256_packus_epi16(w16, w16);
  const __m128i bytes =
      _mm_unpacklo_epi32(_mm256_castsi256_si128(w8), _mm256_extracti128_si256(w8, 1));
  if (n == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q), bytes);
  } else {
    alignas(16) uint8_t out[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), bytes);
    for (int j = 0; j < n; ++j) q[j] = out[j];
  }
}
#endif

#if ANVIL_SIMD_HAVE_AVX512
template <>
inline void CastLanes<F32x16>(F32x16 v, const Fp8Encoding& e, uint8_t* q, int n) {
  const __m512i bits = _mm512_castps_si512(v.v);
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
  const __m512i a = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __m128i drop = _mm_cvtsi32_si128(e.dropped);
  const __m512i half =
      _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>((1u << (e.dropped - 1)) - 1u)),
                       _mm512_and_si512(_mm512_srl_epi32(a, drop), _mm512_set1_epi32(1)));
  const __m512i normal = _mm512_sub_epi32(_mm512_srl_epi32(_mm512_add_epi32(a, half), drop),
                                          _mm512_set1_epi32(static_cast<int>(e.rebias)));
  const __m512 magic = _mm512_set1_ps(kRoundToInteger);
  const __m512 t = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(e.subnormal_inv));
  const __m512i sub = _mm512_cvttps_epi32(_mm512_sub_ps(_mm512_add_ps(t, magic), magic));
  auto at_least = [&](uint32_t k) {
    return _mm512_cmpge_epu32_mask(a, _mm512_set1_epi32(static_cast<int>(k)));
  };
  __m512i code = _mm512_mask_blend_epi32(at_least(e.min_normal), sub, normal);
  code = _mm512_mask_blend_epi32(at_least(e.max), code,
                                 _mm512_set1_epi32(static_cast<int>(e.max_code)));
  code = _mm512_or_si512(code, sign);
  code = _mm512_mask_blend_epi32(at_least(0x7F800001u), code, _mm512_set1_epi32(0x7F));
  _mm_mask_storeu_epi8(q, static_cast<__mmask16>((1u << n) - 1u), _mm512_cvtepi32_epi8(code));
}
#endif

template <typename V>
void ScaleCast(const float* x, int64_t n, float s, bool divide, bool e5m2, uint8_t* q) {
  constexpr int64_t L = V::kLanes;
  const Fp8Encoding& e = e5m2 ? kE5M2Encoding : kE4M3Encoding;
  const V sv = V::Set(s);
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V v = V::Load(x + i);
    CastLanes<V>(divide ? v / sv : v * sv, e, q + i, static_cast<int>(L));
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    const V v = V::LoadN(x + i, rest);
    CastLanes<V>(divide ? v / sv : v * sv, e, q + i, rest);
  }
}

template <typename V>
void DivideCastColumns(const float* x, int64_t ld, int64_t rows, int64_t cols, const float* s,
                       bool e5m2, uint8_t* q) {
  constexpr int64_t L = V::kLanes;
  const Fp8Encoding& e = e5m2 ? kE5M2Encoding : kE4M3Encoding;
  for (int64_t c = 0; c < cols; c += L) {
    const int n = static_cast<int>(cols - c < L ? cols - c : L);
    const V sv = V::LoadN(s + c, n, 1.0f);
    for (int64_t r = 0; r < rows; ++r)
      CastLanes<V>(V::LoadN(x + r * ld + c, n) / sv, e, q + r * cols + c, n);
  }
}

#if defined(__SSE2__)
// A 16 x 16 block of bytes transposed: four rounds of unpacks, each doubling
// the run of one column's bytes (2, 4, 8, then 16 rows).
inline void Transpose16x16(const uint8_t* in, int64_t ld_in, uint8_t* out, int64_t ld_out) {
  __m128i a[16], b[16];
  for (int i = 0; i < 16; ++i) {
    a[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i * ld_in));
  }
  // b[2k + h]: rows 2k, 2k+1, columns 8h..8h+7.
  for (int k = 0; k < 8; ++k) {
    b[2 * k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
    b[2 * k + 1] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
  }
  // a[4q + j]: rows 4q..4q+3, columns 4j..4j+3.
  for (int q = 0; q < 4; ++q) {
    for (int h = 0; h < 2; ++h) {
      a[4 * q + 2 * h] = _mm_unpacklo_epi16(b[4 * q + h], b[4 * q + 2 + h]);
      a[4 * q + 2 * h + 1] = _mm_unpackhi_epi16(b[4 * q + h], b[4 * q + 2 + h]);
    }
  }
  // b[8o + p]: rows 8o..8o+7, columns 2p and 2p+1.
  for (int o = 0; o < 2; ++o) {
    for (int j = 0; j < 4; ++j) {
      b[8 * o + 2 * j] = _mm_unpacklo_epi32(a[8 * o + j], a[8 * o + 4 + j]);
      b[8 * o + 2 * j + 1] = _mm_unpackhi_epi32(a[8 * o + j], a[8 * o + 4 + j]);
    }
  }
  for (int p = 0; p < 8; ++p) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * p * ld_out),
                     _mm_unpacklo_epi64(b[p], b[8 + p]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (2 * p + 1) * ld_out),
                     _mm_unpackhi_epi64(b[p], b[8 + p]));
  }
}
#endif

template <typename V>
void TransposeCodes(const uint8_t* codes, int64_t rows, int64_t cols, uint8_t* out, int64_t ld) {
  int64_t whole_rows = 0, whole_cols = 0;  // the part done in 16 x 16 blocks
#if defined(__SSE2__)
  if constexpr (V::kLanes > 1) {  // the portable tier stays byte by byte
    whole_rows = rows / 16 * 16;
    whole_cols = cols / 16 * 16;
    for (int64_t r = 0; r < whole_rows; r += 16) {
      for (int64_t c = 0; c < whole_cols; c += 16) {
        Transpose16x16(codes + r * cols + c, cols, out + c * ld + r, ld);
      }
    }
  }
#endif
  for (int64_t c = 0; c < cols; ++c) {
    const int64_t from = c < whole_cols ? whole_rows : 0;
    for (int64_t r = from; r < rows; ++r) out[c * ld + r] = codes[r * cols + c];
  }
}

// A block's dequantization factor s and its E8M0 code (MX rules), by the
// rules of quant.h, from the bits (ANVIL_SIMD_NS code calls no library).
struct BlockScaleOf {
  float s;
  uint8_t e8m0;
};
inline BlockScaleOf ScaleOfBlock(float amax, float fp8_max, int fp8_emax, BlockScale rule) {
  if (amax != amax) return {simd_detail::FromBits(0x7FC00000u), 0xFF};
  if (rule == BlockScale::kAmax) {
    // A quotient below the least f32 (amax < ~6e-43) takes that least value.
    const float q = amax / fp8_max;
    return {amax == 0.0f ? 1.0f : (q == 0.0f ? simd_detail::FromBits(1u) : q), 0};
  }
  uint32_t code = 0;  // 2^-127: an all-zero block
  if (rule == BlockScale::kMxOcp) {
    if (amax > 0.0f) {
      // floor(log2 amax) from the exponent field, or the leading one of a subnormal.
      const uint32_t bits = simd_detail::Bits(amax);
      const int exponent = static_cast<int>(bits >> 23);
      const int floor_log2 =
          exponent > 0 ? exponent - 127 : -149 + (31 - __builtin_clz(bits & 0x7FFFFFu));
      const int biased = floor_log2 - fp8_emax + 127;
      code = static_cast<uint32_t>(biased < 0 ? 0 : (biased > 254 ? 254 : biased));
    }
  } else {
    // ceil(log2(amax / fp8_max)): the quotient's exponent, one up unless it is
    // a power of two (at most 2^-127 is code 0; capped at 2^127).
    const uint32_t a = simd_detail::Bits(amax / fp8_max);
    const uint32_t mantissa = a & 0x7FFFFFu;
    code = a >> 23;
    if (code == 0) {
      code = mantissa > 0x400000u ? 1 : 0;
    } else if (mantissa != 0) {
      ++code;
    }
    if (code > 254) code = 254;
  }
  const float scale = simd_detail::FromBits(code == 0 ? 0x00400000u : code << 23);
  return {scale, static_cast<uint8_t>(code)};
}

template <typename V>
void QuantizeRow(const float* x, int64_t cols, const quant_internal::RowQuant& rq, uint8_t* q,
                 float* s_f32, uint8_t* s_e8m0) {
  const bool mx = rq.rule != BlockScale::kAmax;
  for (int64_t c0 = 0, j = 0; c0 < cols; c0 += rq.block, ++j) {
    const int64_t len = cols - c0 < rq.block ? cols - c0 : rq.block;
    const BlockScaleOf s = ScaleOfBlock(Amax<V>(x + c0, len), rq.fp8_max, rq.fp8_emax, rq.rule);
    if (mx) {
      s_e8m0[j] = s.e8m0;
      // A power of two: times its exact inverse is the quotient, bit for bit.
      ScaleCast<V>(x + c0, len, 1.0f / s.s, /*divide=*/false, rq.e5m2, q + c0);
    } else {
      s_f32[j] = s.s;
      ScaleCast<V>(x + c0, len, s.s, /*divide=*/true, rq.e5m2, q + c0);
    }
  }
}

template <typename V>
constexpr quant_internal::Kernels MakeKernels() {
  return {Amax<V>,        ColumnAmax<V>,    ScaleCast<V>, DivideCastColumns<V>,
          QuantizeRow<V>, TransposeCodes<V>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::quant
