// AVX2 streaming path of GemmFp8 for small M (decode), from B laid out once
// for it (Fp8StreamB's AVX2 layout, gemm_internal.h): every code is read
// once, one byte a weight, and decoded in registers through f16, which
// holds every FP8 value but NaN (B has none): E5M2's bits are the high byte
// of its f16 bits; E4M3's are its f16 bits of the value times 2^-8 (sign to
// bit 15, exponent and mantissa shifted by 7, subnormals included), which
// vcvtph2ps widens exactly and one multiply by 2^8 restores.
//
// Bitwise equal to the packed path (gemm_driver.h with gemm_fp8.h's
// packing), where the AVX2 tier decodes FP8 to f32 words for either decode
// format: per K block, each C lane runs vfmadd231ps over the same k in the
// same order from zero on the same values (MX factors folded in as an f32
// product, A decoded as the packer decodes it), and the block goes into C as
// the driver puts it there: C (+)= P for MX x MX, else fma(P, sa * sb, C)
// (the first block without accumulate: P * (sa * sb)).
//
// A strip (16 columns) is contiguous over all K; up to 4 rows at a time keep
// their sums in registers (more rows take a second pass over the strip, from
// the L2).
#include <immintrin.h>

#include <cstdint>

#include "anvil/kernels/cpu/gemm_avx2.h"
#include "anvil/kernels/cpu/gemm_fp8.h"

namespace anvil::kernels::gemm_internal::avx2 {
namespace {

// gemm_fp8.h's StreamCall for this unit: a tier type of
// its own, so no symbol is shared with code built for another ISA.
struct StreamTier {};
using Fp8 = Fp8Pack<StreamTier>;
constexpr int64_t kStrip = Fp8StreamB::kStreamRowCols;
static_assert(kStrip == 16, "a line is 16 codes: two vectors of 8 columns");
// Rows whose sums one pass keeps in registers (2 per row, of 16).
constexpr int kPassRows = 4;
// Lines a strip is read ahead of its use (4 KiB), into L1, as the AVX-512 unit.
constexpr int64_t kPrefetchLines = 256;

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// Row r's 16 codes -> v0 (columns 0-7), v1 (8-15) as f32 values.
template <bool kE5M2>
[[gnu::always_inline]] inline void DecodeLine(const uint8_t* line, __m256& v0, __m256& v1) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(line));
  if constexpr (kE5M2) {
    const __m128i zero = _mm_setzero_si128();
    v0 = _mm256_cvtph_ps(_mm_unpacklo_epi8(zero, x));
    v1 = _mm256_cvtph_ps(_mm_unpackhi_epi8(zero, x));
  } else {
    // Sign-extended to 16 bits, << 7: the magnitude at bits 7-13, the sign at
    // 14 and 15; keep 15 and 7-13 (0xBF80): the f16 bits of value * 2^-8.
    const __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(x), 7),
                                       _mm256_set1_epi16(static_cast<short>(0xBF80)));
    const __m256 scale = _mm256_set1_ps(256.0f);
    v0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), scale);
    v1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), scale);
  }
}

// Fp8Pack::Pow2 of 8 E8M0 codes.
__m256 Pow2(const uint8_t* e8m0) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e8m0)));
  __m256i bits = _mm256_slli_epi32(e, 23);
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000),
                            _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7FC00000),
                            _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0xFF)));
  return _mm256_castsi256_ps(bits);
}

using Job = Fp8StreamCall;

// Rows [i0, i0 + M) of strip s over all K into C.
template <int M, bool kE5M2, bool kMx>
void Strip(const Job& j, int64_t s, int64_t i0) {
  const uint8_t* strip = j.b->codes + s * j.k * kStrip;
  const float* a = j.a_f32 + i0 * j.k;
  const int64_t col0 = s * kStrip;
  __m256i mask[2];  // C's columns of this strip
  for (int v = 0; v < 2; ++v) mask[v] = LaneMask(j.n - col0 - 8 * v);
  alignas(32) float run[M][kStrip] = {};  // C's running sums (set by the first block)
  __m256 factor[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};  // kMx: this MX block's
  for (int64_t kb = 0; kb < j.kblocks; ++kb) {
    const int64_t k0 = kb * j.kblock, k1 = Min(k0 + j.kblock, j.k);
    // The sums live in registers: every loop over them is unrolled.
    __m256 acc[M][2];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
    for (int64_t r = k0; r < k1;) {
      int64_t stop = k1;
      if constexpr (kMx) {  // a run of one MX block, with its factors
        const int64_t mb = r / j.mx_block;
        const uint8_t* e = j.b->e8m0 + (s * j.mx_blocks + mb) * kStrip;
        factor[0] = Pow2(e);
        factor[1] = Pow2(e + 8);
        stop = Min(stop, (mb + 1) * j.mx_block);
      }
      for (; r < stop; ++r) {
        // An address computed as an integer: past the stream's end it is no pointer into it.
        _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(strip + r * kStrip) +
                                                   kPrefetchLines * kStrip),
                     _MM_HINT_T0);
        __m256 v0, v1;
        DecodeLine<kE5M2>(strip + r * kStrip, v0, v1);
        if constexpr (kMx) {
          v0 = _mm256_mul_ps(v0, factor[0]);
          v1 = _mm256_mul_ps(v1, factor[1]);
        }
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          const __m256 ai = _mm256_broadcast_ss(a + i * j.k + r);
          acc[i][0] = _mm256_fmadd_ps(ai, v0, acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(ai, v1, acc[i][1]);
        }
      }
    }
    // The block into C's running sums, as the driver puts a block's tile into C.
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        float* rs = &run[i][8 * v];
        const __m256 p = acc[i][v];
        const bool first = kb == 0;
        const __m256 prev = first
                                ? _mm256_maskload_ps(j.c + (i0 + i) * j.ldc + col0 + 8 * v, mask[v])
                                : _mm256_load_ps(rs);
        __m256 x;
        if (j.scaled) {
          const float* sb = j.b->factors + (s * j.kblocks + kb) * kStrip + 8 * v;
          const __m256 sab =
              _mm256_mul_ps(_mm256_set1_ps(j.sa[(i0 + i) * j.kblocks + kb]), _mm256_load_ps(sb));
          x = first && !j.accumulate ? _mm256_mul_ps(p, sab) : _mm256_fmadd_ps(p, sab, prev);
        } else {
          x = first && !j.accumulate ? p : _mm256_add_ps(prev, p);
        }
        _mm256_store_ps(rs, x);
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int v = 0; v < 2; ++v) {
      _mm256_maskstore_ps(j.c + (i0 + i) * j.ldc + col0 + 8 * v, mask[v],
                          _mm256_load_ps(&run[i][8 * v]));
    }
  }
}

// Rows [i0, i0 + rows) of strip s (rows <= kPassRows).
template <bool kE5M2, bool kMx>
void Pass(const Job& j, int64_t s, int64_t i0, int64_t rows) {
  switch (rows) {
    case 1:
      return Strip<1, kE5M2, kMx>(j, s, i0);
    case 2:
      return Strip<2, kE5M2, kMx>(j, s, i0);
    case 3:
      return Strip<3, kE5M2, kMx>(j, s, i0);
    case 4:
      return Strip<4, kE5M2, kMx>(j, s, i0);
    default:
      __builtin_trap();
  }
}

template <bool kE5M2, bool kMx>
void Columns(const Job& j, int64_t s0, int64_t s1) {
  // Rows in passes of at most kPassRows, as even as they come (8 = 4 + 4).
  const int64_t passes = (j.m + kPassRows - 1) / kPassRows;
  for (int64_t s = s0; s < s1; ++s) {
    for (int64_t q = 0, i0 = 0; q < passes; ++q) {
      const int64_t rows = (j.m - i0) / (passes - q);
      Pass<kE5M2, kMx>(j, s, i0, rows);
      i0 += rows;
    }
  }
}

}  // namespace

void DecodeFp8Region(const Problem& p, const Region& r, std::byte* scratch) {
  // This tier's packed path decodes FP8 to f32 words for either decode format.
  const Job j = Fp8::StreamCall(p, /*pairs=*/false, scratch);
  const int64_t s0 = r.n0 / kStrip, s1 = (r.n1 + kStrip - 1) / kStrip;
  const bool e5m2 = p.fp8->b.format == Fp8Format::kE5M2, mx = j.mx_block > 0;
  if (e5m2) {
    mx ? Columns<true, true>(j, s0, s1) : Columns<true, false>(j, s0, s1);
  } else {
    mx ? Columns<false, true>(j, s0, s1) : Columns<false, false>(j, s0, s1);
  }
}

}  // namespace anvil::kernels::gemm_internal::avx2
