// AVX-512 streaming path of GemmFp8 for small M (decode), from B laid out
// once for it (Fp8StreamB, gemm_internal.h): every code is read once, one
// byte a weight, and decoded in registers. A line of 64 codes (32 columns x
// a k-pair) goes through two AVX512_VBMI byte permutes of the word table
// (low and high bytes of the codes' magnitudes; the sign bit goes straight
// into the high byte) and two byte unpacks, which leave each column's
// (2r, 2r + 1) pair as one 32-bit word, columns in order.
//
// Bitwise equal to the packed path (gemm_driver.h with gemm_fp8.h's
// packing): per K block, each C lane runs the same instruction over the same
// k in the same order from zero (vfmadd231ps per k on f32 values, or
// vdpbf16ps per k-pair on bf16 pairs), on B's values decoded and MX-scaled
// as the packer decodes them (f32 product; bf16: rounded to nearest even,
// NaN to 0x7FFF, an odd K's last half zero) and A's decoded the same way;
// each block then goes into C as the driver puts it there: C (+)= P for
// MX x MX, else fma(P, sa * sb, C) (the first block without accumulate:
// P * (sa * sb)).
//
// A strip's codes are contiguous over all K, so each thread streams long
// sequential runs, and a K block's sums stay in registers.
#include <cstdint>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_avx512.h"
#include "anvil/kernels/cpu/gemm_fp8.h"

namespace anvil::kernels::gemm_internal::avx512 {
namespace {

// gemm_fp8.h's StreamCall for this unit: a tier type of
// its own, so no symbol is shared with code built for another ISA.
struct StreamTier {};
using Fp8 = Fp8Pack<StreamTier>;
constexpr int64_t kStrip = Fp8StreamB::kStreamPairCols;
static_assert(kStrip == 32, "a line is 64 codes: 32 columns x a k-pair");

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
__mmask16 Mask16(int64_t n) {
  return n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}

// The word table's codes 0-127 as byte tables for vpermi2b (low bytes in
// lo, high bytes in hi); codes 128-255 are their negatives, the sign bit of
// the high byte (Fp8StreamB: B has no NaN code).
// shift_lo/shift_hi: the E8M0 codes e for which every non-zero word times
// 2^(e - 127) stays a normal number (see ShiftPair); empty if none. NaN
// words are left out (a streamed B holds no NaN code); an infinite one
// (E5M2) empties the range.
struct Tables {
  __m512i lo[2], hi[2];
  int shift_lo = 255, shift_hi = 0;
};
Tables LoadTables(const uint16_t* words) {
  alignas(64) uint8_t lo[128], hi[128];
  int field_min = 255, field_max = 0;  // exponent fields of the non-zero words
  bool normal = true;
  for (int q = 0; q < 128; ++q) {
    lo[q] = static_cast<uint8_t>(words[q] & 0xFF);
    hi[q] = static_cast<uint8_t>(words[q] >> 8);
    const int magnitude = words[q] & 0x7FFF;
    if (magnitude == 0 || magnitude > 0x7F80) continue;  // zero, NaN
    const int field = magnitude >> 7;
    normal = normal && field != 0 && field != 0xFF;
    field_min = field < field_min ? field : field_min;
    field_max = field > field_max ? field : field_max;
  }
  Tables t;
  for (int i = 0; i < 2; ++i) {
    t.lo[i] = _mm512_load_si512(lo + 64 * i);
    t.hi[i] = _mm512_load_si512(hi + 64 * i);
  }
  if (normal && field_max > 0) {
    // field + e - 127 in [1, 254] for every field; e in [1, 254] (not 2^-127, not NaN).
    t.shift_lo = 128 - field_min > 1 ? 128 - field_min : 1;
    t.shift_hi = 381 - field_max < 254 ? 381 - field_max : 254;
  }
  return t;
}

// One line's 64 codes -> w0 (columns 0-15), w1 (16-31): per column the word
// pair of rows (2r, 2r + 1), the even row low.
[[gnu::always_inline]] inline void DecodeLine(const uint8_t* line, const Tables& t, __m512i& w0,
                                              __m512i& w1) {
  const __m512i x = _mm512_load_si512(line);
  const __m512i lo = _mm512_permutex2var_epi8(t.lo[0], x, t.lo[1]);  // index: the low 7 bits
  // hi | (x & 0x80): the code's sign into the high byte.
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi[0], x, t.hi[1]), x,
                                               _mm512_set1_epi8(static_cast<char>(0x80)), 0xF8);
  w0 = _mm512_unpacklo_epi8(lo, hi);
  w1 = _mm512_unpackhi_epi8(lo, hi);
}

__m512 EvenRow(__m512i w) { return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)); }
__m512 OddRow(__m512i w) {
  return _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Fp8Pack::Pow2 of 16 E8M0 codes.
__m512 Pow2(const uint8_t* e8m0) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e8m0)));
  __m512i bits = _mm512_slli_epi32(e, 23);
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()),
                               _mm512_set1_epi32(0x00400000));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0xFF)),
                               _mm512_set1_epi32(0x7FC00000));
  return _mm512_castsi512_ps(bits);
}

// Fp8Pack::Bf16 in the low half of each lane (the high half zero).
__m512i Bf16Bits(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                                                _mm512_set1_epi32(0x7F800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FFF));
}

// A bf16 pair word times its column's MX factor, as the packer encodes it
// (each half Bf16(value * factor); without the odd row, that half zero).
template <bool kHasOdd>
__m512i ScalePair(__m512i w, __m512 factor) {
  const __m512i even = Bf16Bits(_mm512_mul_ps(EvenRow(w), factor));
  if constexpr (!kHasOdd) return even;
  const __m512i odd = Bf16Bits(_mm512_mul_ps(OddRow(w), factor));
  return _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
}

// The same pair word as ScalePair when 2^(e - 127) keeps every value normal:
// a value of at most 8 significant bits times a power of two is exact, and
// its bf16 bits are the word's with e - 127 added to the exponent field
// (`shift`, both halves; zeros stay zero). Two instructions, where ScalePair
// spends some twenty: the bf16-pair MX stream's cost.
template <bool kHasOdd>
__m512i ShiftPair(__m512i w, __m512i shift) {
  const __mmask32 nonzero = _mm512_test_epi16_mask(w, _mm512_set1_epi16(0x7FFF));
  const __m512i scaled = _mm512_mask_add_epi16(w, nonzero, w, shift);
  if constexpr (!kHasOdd) return _mm512_and_si512(scaled, _mm512_set1_epi32(0xFFFF));
  return scaled;
}

// ShiftPair's shift for 16 E8M0 codes: (e - 127) << 7 in both 16-bit halves.
__m512i ExponentShift(const uint8_t* e8m0) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e8m0)));
  const __m512i s = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(127)), 7);
  return _mm512_or_si512(_mm512_and_si512(s, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(s, 16));
}

// Whether a strip's 32 E8M0 codes of one block all lie in [lo, hi].
bool AllInRange(const uint8_t* e8m0, int lo, int hi) {
  const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e8m0));
  const __mmask32 low = _mm256_cmplt_epu8_mask(e, _mm256_set1_epi8(static_cast<char>(lo)));
  const __mmask32 high = _mm256_cmpgt_epu8_mask(e, _mm256_set1_epi8(static_cast<char>(hi)));
  return (low | high) == 0;
}

// Lines a strip is read ahead of its use (4 KiB), into L1: with it, 1 and 8
// rows x 32768 x 4096 (128 MiB of codes) ran at 65-70 and 170-180 GFLOP/s
// instead of 47 and 113 (the hardware prefetcher alone; 16-160 lines tried).
constexpr int64_t kPrefetchLines = 64;

using Job = Fp8StreamCall;

// Prefetches `ahead` bytes past p (into L1), an address computed as an
// integer: past the end of the stream it is not a pointer into it.
[[gnu::always_inline]] inline void Prefetch(const uint8_t* p, int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + ahead), _MM_HINT_T0);
}

// B's MX scaling in the current block (kMx), per strip and half: the factors,
// and where every code of the block allows it (`shifts`), ShiftPair's shift.
template <int NS>
struct MxBlock {
  __m512 factor[NS][2];
  __m512i shift[NS][2];
};

// Line r of NS strips into the sums (kHasOdd: row 2r + 1 < k; kShift: the
// block's bf16 pairs scaled by ShiftPair).
template <int M, int NS, bool kBf16, bool kMx, bool kHasOdd, bool kShift>
[[gnu::always_inline]] inline void Line(const Job& j, const Tables& t, const uint8_t* const* strip,
                                        int64_t r, const MxBlock<NS>& mx, __m512 (&acc)[M][NS][2]) {
#pragma GCC unroll 4
  for (int s = 0; s < NS; ++s) {
    __m512i w[2];
    Prefetch(strip[s] + r * 64, kPrefetchLines * 64);
    DecodeLine(strip[s] + r * 64, t, w[0], w[1]);
#pragma GCC unroll 2
    for (int v = 0; v < 2; ++v) {
      if constexpr (kBf16) {
        __m512i pair = w[v];
        if constexpr (kMx && kShift) pair = ShiftPair<kHasOdd>(pair, mx.shift[s][v]);
        if constexpr (kMx && !kShift) pair = ScalePair<kHasOdd>(pair, mx.factor[s][v]);
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          const __m512i a = _mm512_set1_epi32(static_cast<int>(j.a_pairs[i * ((j.k + 1) / 2) + r]));
          acc[i][s][v] = _mm512_dpbf16_ps(acc[i][s][v], (__m512bh)a, (__m512bh)pair);
        }
      } else {
        __m512 even = EvenRow(w[v]), odd = OddRow(w[v]);
        if constexpr (kMx) {
          even = _mm512_mul_ps(even, mx.factor[s][v]);
          odd = _mm512_mul_ps(odd, mx.factor[s][v]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          const float* a = j.a_f32 + i * j.k + 2 * r;
          acc[i][s][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[0]), even, acc[i][s][v]);
          if constexpr (kHasOdd) {
            acc[i][s][v] = _mm512_fmadd_ps(_mm512_set1_ps(a[1]), odd, acc[i][s][v]);
          }
        }
      }
    }
  }
}

// Strips [s0, s0 + NS) over all K into C.
template <int M, int NS, bool kBf16, bool kMx>
void Strips(const Job& j, const Tables& t, int64_t s0) {
  const uint8_t* strip[NS];
  const int64_t lines = (j.k + 1) / 2;
  for (int s = 0; s < NS; ++s) strip[s] = j.b->codes + (s0 + s) * lines * 64;
  alignas(64) float run[M][NS][kStrip];  // C's running sums
  MxBlock<NS> mx;                        // kMx: B's scaling in the current MX block
  for (int64_t kb = 0; kb < j.kblocks; ++kb) {
    const int64_t k0 = kb * j.kblock, k1 = Min(k0 + j.kblock, j.k);
    // The sums live in registers: every loop over them is unrolled.
    __m512 acc[M][NS][2];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
      for (int s = 0; s < NS; ++s) acc[i][s][0] = acc[i][s][1] = _mm512_setzero_ps();
    }
    // Lines [k0 / 2, k1 / 2) are whole pairs (k0 even); an odd k1 (K's end)
    // leaves a half line. kMx: in runs of one MX block, each with its factors.
    for (int64_t r = k0 / 2; r < (k1 + 1) / 2;) {
      int64_t stop = (k1 + 1) / 2;
      bool shifts = false;
      if constexpr (kMx) {
        const int64_t mb = 2 * r / j.mx_block;
        shifts = kBf16;
        for (int s = 0; s < NS; ++s) {
          const uint8_t* e = j.b->e8m0 + ((s0 + s) * j.mx_blocks + mb) * kStrip;
          mx.factor[s][0] = Pow2(e);
          mx.factor[s][1] = Pow2(e + 16);
          mx.shift[s][0] = ExponentShift(e);
          mx.shift[s][1] = ExponentShift(e + 16);
          shifts = shifts && AllInRange(e, t.shift_lo, t.shift_hi);
        }
        stop = Min(stop, (mb + 1) * j.mx_block / 2);
      }
      auto lines = [&]<bool kShift>() {
        for (const int64_t full = Min(stop, k1 / 2); r < full; ++r) {
          Line<M, NS, kBf16, kMx, true, kShift>(j, t, strip, r, mx, acc);
        }
        if (r < stop) Line<M, NS, kBf16, kMx, false, kShift>(j, t, strip, r++, mx, acc);
      };
      if (shifts) {
        lines.template operator()<kMx && kBf16>();
      } else {
        lines.template operator()<false>();
      }
    }
    // The block into C's running sums, as the driver puts a block's tile into C.
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
      for (int s = 0; s < NS; ++s) {
#pragma GCC unroll 2
        for (int v = 0; v < 2; ++v) {
          const int64_t col = (s0 + s) * kStrip + 16 * v;
          float* rs = &run[i][s][16 * v];
          const __m512 p = acc[i][s][v];
          const bool first = kb == 0;
          __m512 prev = first ? _mm512_maskz_loadu_ps(Mask16(j.n - col), j.c + i * j.ldc + col)
                              : _mm512_load_ps(rs);
          __m512 x;
          if (j.scaled) {
            const float* sb = j.b->factors + ((s0 + s) * j.kblocks + kb) * kStrip + 16 * v;
            const __m512 sab =
                _mm512_mul_ps(_mm512_set1_ps(j.sa[i * j.kblocks + kb]), _mm512_load_ps(sb));
            x = first && !j.accumulate ? _mm512_mul_ps(p, sab) : _mm512_fmadd_ps(p, sab, prev);
          } else {
            x = first && !j.accumulate ? p : _mm512_add_ps(prev, p);
          }
          _mm512_store_ps(rs, x);
        }
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int s = 0; s < NS; ++s) {
      for (int v = 0; v < 2; ++v) {
        const int64_t col = (s0 + s) * kStrip + 16 * v;
        _mm512_mask_storeu_ps(j.c + i * j.ldc + col, Mask16(j.n - col),
                              _mm512_load_ps(&run[i][s][16 * v]));
      }
    }
  }
}

// Strips [s0, s1): NS at a time where M leaves registers for it (the
// sums, M x 2 x NS, with the 8 table registers), then one at a time.
template <int M, bool kBf16, bool kMx>
void Columns(const Job& j, const Tables& t, int64_t s0, int64_t s1) {
  constexpr int kNs = M <= 2 ? 4 : M <= 4 ? 2 : 1;
  int64_t s = s0;
  for (; s + kNs <= s1; s += kNs) Strips<M, kNs, kBf16, kMx>(j, t, s);
  for (; s < s1; ++s) Strips<M, 1, kBf16, kMx>(j, t, s);
}

template <int M>
void Columns(const Job& j, const Tables& t, bool bf16, int64_t s0, int64_t s1) {
  const bool mx = j.mx_block > 0;
  if (bf16) {
    mx ? Columns<M, true, true>(j, t, s0, s1) : Columns<M, true, false>(j, t, s0, s1);
  } else {
    mx ? Columns<M, false, true>(j, t, s0, s1) : Columns<M, false, false>(j, t, s0, s1);
  }
}

}  // namespace

void DecodeFp8Region(const Problem& p, const Region& r, std::byte* scratch) {
  const bool bf16 = p.fp8->decode_bf16;
  const Job j = Fp8::StreamCall(p, /*pairs=*/bf16, scratch);
  const Tables t = LoadTables(j.b->words);
  const int64_t s0 = r.n0 / kStrip, s1 = (r.n1 + kStrip - 1) / kStrip;
  switch (p.m) {
    case 1:
      return Columns<1>(j, t, bf16, s0, s1);
    case 2:
      return Columns<2>(j, t, bf16, s0, s1);
    case 3:
      return Columns<3>(j, t, bf16, s0, s1);
    case 4:
      return Columns<4>(j, t, bf16, s0, s1);
    case 5:
      return Columns<5>(j, t, bf16, s0, s1);
    case 6:
      return Columns<6>(j, t, bf16, s0, s1);
    case 7:
      return Columns<7>(j, t, bf16, s0, s1);
    case 8:
      return Columns<8>(j, t, bf16, s0, s1);
    default:
      __builtin_trap();  // StreamsB sends only M <= kDecodeChunkRows
  }
}

}  // namespace anvil::kernels::gemm_internal::avx512
