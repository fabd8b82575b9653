// GemmFp8's packing of FP8 operand rows into bf16 k-pairs with AVX512_VBMI
// byte permutes in place of gathers: the words of 64 codes come from four
// vpermi2b over the format's 256-entry word table (its low and high bytes,
// codes 0-127 and 128-255 apart, the code's top bit choosing) and two
// vpermt2b that lay them out in code order, two codes (an even and an odd k)
// to a 32-bit word. The table is gemm_fp8.h's bf16 table itself, so every
// code, NaN and infinity included, gets the word the gathers (and the scalar
// Fp8Pack::Pack) give. An MX block's factor 2^(e - 127) then goes into the
// words as an exponent add where every finite non-zero word times it stays
// a normal number (the product is exact, so its rounding is too), and
// through the f32 product and the packer's rounding elsewhere. The same
// panels, bit for bit (kernels_gemm_fp8_pack_test). The gathers cost about a
// third of a training GEMM's time on Zen 5.
#include <cstdint>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_avx512.h"
#include "anvil/kernels/cpu/gemm_avx512_pack_internal.h"

namespace anvil::kernels::gemm_internal::avx512 {
namespace {

__mmask16 Mask16(int64_t n) {
  return n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}
__mmask32 Mask32(int64_t n) {
  return n >= 32 ? 0xFFFFFFFFu : n <= 0 ? 0 : static_cast<__mmask32>((1u << n) - 1u);
}
__mmask64 Mask64(int64_t n) {
  return n >= 64 ? ~__mmask64{0} : n <= 0 ? 0 : (__mmask64{1} << n) - 1u;
}

// The 256 words' low and high bytes, 64 codes a register.
struct WordTable {
  __m512i lo[4], hi[4];
};
WordTable LoadTable(const uint16_t* words) {
  alignas(64) uint8_t lo[256], hi[256];
  for (int q = 0; q < 256; ++q) {
    lo[q] = static_cast<uint8_t>(words[q] & 0xFF);
    hi[q] = static_cast<uint8_t>(words[q] >> 8);
  }
  WordTable t;
  for (int i = 0; i < 4; ++i) {
    t.lo[i] = _mm512_load_si512(lo + 64 * i);
    t.hi[i] = _mm512_load_si512(hi + 64 * i);
  }
  return t;
}

// vpermt2b indices that interleave two byte vectors (low bytes a, high bytes
// b) into the 16-bit words of elements [32h, 32h + 32): byte 2i from a[32h +
// i], byte 2i + 1 from b[32h + i] (index bit 6 selects b).
__m512i InterleaveIndex(int h) {
  alignas(64) uint8_t idx[64];
  for (int i = 0; i < 32; ++i) {
    idx[2 * i] = static_cast<uint8_t>(32 * h + i);
    idx[2 * i + 1] = static_cast<uint8_t>(64 + 32 * h + i);
  }
  return _mm512_load_si512(idx);
}

struct Decoder {
  const uint16_t* words;  // the 256 words the table holds
  WordTable table;
  __m512i first, second;  // InterleaveIndex(0), (1)

  // The words of 64 codes, in code order: words 0-31 in *w0, 32-63 in *w1
  // (as 32-bit lanes, codes 2i and 2i + 1 in lane i's low and high halves).
  [[gnu::always_inline]] void Words(__m512i codes, __m512i* w0, __m512i* w1) const {
    const __mmask64 upper = _mm512_movepi8_mask(codes);  // codes 128-255
    const __m512i lo =
        _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(table.lo[0], codes, table.lo[1]),
                               _mm512_permutex2var_epi8(table.lo[2], codes, table.lo[3]));
    const __m512i hi =
        _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(table.hi[0], codes, table.hi[1]),
                               _mm512_permutex2var_epi8(table.hi[2], codes, table.hi[3]));
    *w0 = _mm512_permutex2var_epi8(lo, first, hi);
    *w1 = _mm512_permutex2var_epi8(lo, second, hi);
  }
};

// The E8M0 codes e whose factor 2^(e - 127) keeps every finite non-zero
// word of the table a normal number: [lo, hi], empty when lo > hi (a word
// that is subnormal already, or none that fits).
struct MxShiftRange {
  int lo = 256, hi = -1;
};
MxShiftRange ShiftRange(const uint16_t* words) {
  int field_min = 255, field_max = 0;
  for (int q = 0; q < 256; ++q) {
    const int magnitude = words[q] & 0x7FFF;
    if (magnitude == 0 || magnitude >= 0x7F80) continue;  // zero, infinity, NaN: unscaled
    const int field = magnitude >> 7;
    if (field == 0) return {};
    field_min = field < field_min ? field : field_min;
    field_max = field > field_max ? field : field_max;
  }
  // field + e - 127 in [1, 254]; e in [1, 254] (not 2^-127, not NaN).
  MxShiftRange r;
  r.lo = 128 - field_min > 1 ? 128 - field_min : 1;
  r.hi = 381 - field_max < 254 ? 381 - field_max : 254;
  return r;
}

// 32 words (16-bit lanes) of one MX block times its factor 2^(e - 127), as
// the packer rounds the f32 product (NaN to 0x7FFF).
[[gnu::always_inline]] inline __m512i ScaleMx(__m512i words, uint8_t e, MxShiftRange shift) {
  if (e >= shift.lo && e <= shift.hi) {  // exact: the exponent field moves by e - 127
    const __m512i magnitude = _mm512_and_si512(words, _mm512_set1_epi16(0x7FFF));
    const __mmask32 finite_nonzero = _mm512_test_epi16_mask(magnitude, magnitude) &
                                     _mm512_cmplt_epu16_mask(magnitude, _mm512_set1_epi16(0x7F80));
    const __m512i shifted = _mm512_mask_add_epi16(
        words, finite_nonzero, words, _mm512_set1_epi16(static_cast<int16_t>((e - 127) * 128)));
    // NaN words as the f32 path rounds them (the format's table has them so).
    return _mm512_mask_mov_epi16(shifted,
                                 _mm512_cmpgt_epu16_mask(magnitude, _mm512_set1_epi16(0x7F80)),
                                 _mm512_set1_epi16(0x7FFF));
  }
  // A word's f32 is the format's value (exact in bf16; a NaN stays a NaN).
  const __m512 f = _mm512_set1_ps(Pow2(e));
  auto half = [&](__m256i w) {
    const __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(w), 16));
    return _mm512_cvtepi32_epi16(Bf16Bits(_mm512_mul_ps(v, f)));
  };
  return _mm512_inserti64x4(_mm512_castsi256_si512(half(_mm512_castsi512_si256(words))),
                            half(_mm512_extracti64x4_epi64(words, 1)), 1);
}

// Rows stored [k, rows]: a step's codes are two rows of 16 columns.
void PackColumns(const Decoder& d, const Fp8Operand& o, int64_t ld, int64_t r0, int64_t rows,
                 int64_t p0, int64_t kc, int k_panel, uint32_t* out) {
  const int64_t steps = (kc + 1) / 2;
  const int64_t padded = (rows + k_panel - 1) / k_panel * k_panel;
  for (int64_t q0 = 0; q0 < padded; q0 += k_panel) {
    uint32_t* panel = out + q0 * steps;
    for (int g = 0; g < k_panel; g += 16) {
      const int group = k_panel - g < 16 ? k_panel - g : 16;
      const int64_t left = rows - q0 - g;
      const int valid = left <= 0 ? 0 : left < group ? static_cast<int>(left) : group;
      const __mmask16 load = Mask16(valid), store = Mask16(group);
      const uint8_t* col = o.data + p0 * ld + r0 + q0 + g;
      auto codes_at = [&](int64_t k) {  // a k's 16 codes, zero past K and the rows
        return k < kc ? _mm_maskz_loadu_epi8(load, col + k * ld) : _mm_setzero_si128();
      };
      // Two steps a decode: k 2st..2st+3 interleaved (even k low, odd k
      // high), words of step st in w[0], of st + 1 in w[1].
      for (int64_t st = 0; st < steps; st += 2) {
        const __m128i k0 = codes_at(2 * st), k1 = codes_at(2 * st + 1);
        const __m128i k2 = codes_at(2 * st + 2), k3 = codes_at(2 * st + 3);
        const __m512i codes = _mm512_inserti64x4(
            _mm512_castsi256_si512(
                _mm256_set_m128i(_mm_unpackhi_epi8(k0, k1), _mm_unpacklo_epi8(k0, k1))),
            _mm256_set_m128i(_mm_unpackhi_epi8(k2, k3), _mm_unpacklo_epi8(k2, k3)), 1);
        __m512i w[2];
        d.Words(codes, &w[0], &w[1]);
        for (int h = 0; h < 2 && st + h < steps; ++h) {
          // Past K a half is zero; rows past the matrix are zero words.
          const int64_t k_odd = 2 * (st + h) + 1;
          const __mmask32 halves = k_odd < kc ? 0xFFFFFFFFu : 0x55555555u;
          const __m512i words = _mm512_maskz_mov_epi16(halves, w[h]);
          _mm512_mask_storeu_epi32(panel + (st + h) * k_panel + g, store,
                                   _mm512_maskz_mov_epi32(load, words));
        }
      }
    }
  }
}

// Rows stored [rows, k]: 64 codes of each of 16 rows decoded (kMx: and
// scaled by their blocks' factors), then two 16 x 16 transposes of their
// words give 32 steps of the 16 rows.
template <bool kMx>
void PackRows(const Decoder& d, const Fp8Operand& o, int64_t ld, int64_t r0, int64_t rows,
              int64_t p0, int64_t kc, int64_t k_total, int k_panel, uint32_t* out) {
  const MxShiftRange shift = kMx ? ShiftRange(d.words) : MxShiftRange{};
  const int64_t mx_blocks = kMx ? (k_total + o.block - 1) / o.block : 0;
  const int64_t steps = (kc + 1) / 2;
  const int64_t padded = (rows + k_panel - 1) / k_panel * k_panel;
  for (int64_t q0 = 0; q0 < padded; q0 += k_panel) {
    uint32_t* panel = out + q0 * steps;
    for (int g = 0; g < k_panel; g += 16) {
      const int group = k_panel - g < 16 ? k_panel - g : 16;
      const __mmask16 store_mask = Mask16(group);
      for (int64_t c0 = 0; c0 < kc; c0 += 64) {
        const int64_t n = kc - c0 < 64 ? kc - c0 : 64;
        __m512 v[2][16];
        for (int i = 0; i < 16; ++i) {
          const int64_t r = q0 + g + i;
          if (i >= group || r >= rows) {
            v[0][i] = v[1][i] = _mm512_setzero_ps();
            continue;
          }
          const uint8_t* codes_at = o.data + (r0 + r) * ld + p0 + c0;
          __m512i w0, w1;
          d.Words(_mm512_maskz_loadu_epi8(Mask64(n), codes_at), &w0, &w1);
          if constexpr (kMx) {
            const uint8_t* e = o.e8m0 + (r0 + r) * mx_blocks;
            w0 = ScaleMx(w0, e[(p0 + c0) / o.block], shift);
            if (n > 32) w1 = ScaleMx(w1, e[(p0 + c0 + 32) / o.block], shift);
          }
          // Halves past K are zero (not value(0), whatever it is).
          v[0][i] = _mm512_castsi512_ps(_mm512_maskz_mov_epi16(Mask32(n), w0));
          v[1][i] = _mm512_castsi512_ps(_mm512_maskz_mov_epi16(Mask32(n - 32), w1));
        }
        for (int h = 0; h < 2; ++h) {
          const int64_t s0 = c0 / 2 + 16 * h;
          if (s0 >= steps) break;
          Transpose16x16(v[h]);
          const int64_t ns = steps - s0 < 16 ? steps - s0 : 16;
          for (int64_t s = 0; s < ns; ++s) {
            _mm512_mask_storeu_ps(reinterpret_cast<float*>(panel + (s0 + s) * k_panel + g),
                                  store_mask, v[h][s]);
          }
        }
      }
    }
  }
}

}  // namespace

bool PackFp8PairsVbmi(const Fp8Operand& o, const uint16_t* bf16, int64_t ld, bool trans, int64_t r0,
                      int64_t rows, int64_t p0, int64_t kc, int64_t k_total, int k_panel,
                      uint32_t* out) {
  const bool mx = o.scaling == Fp8Scaling::kMx;
  // An MX block is one or more 32-code halves of a decode, rows stored [rows, k].
  if (mx && (trans || o.block % 32 != 0 || p0 % 32 != 0)) return false;
  const Decoder d{bf16, LoadTable(bf16), InterleaveIndex(0), InterleaveIndex(1)};
  if (trans) {
    PackColumns(d, o, ld, r0, rows, p0, kc, k_panel, out);
  } else if (mx) {
    PackRows<true>(d, o, ld, r0, rows, p0, kc, k_total, k_panel, out);
  } else {
    PackRows<false>(d, o, ld, r0, rows, p0, kc, k_total, k_panel, out);
  }
  return true;
}

}  // namespace anvil::kernels::gemm_internal::avx512
