// AVX2 streaming path of GemmFp8 for small M (decode), from B laid out once
// for it (Fp8StreamB's AVX2 layout, gemm_internal.h): every code is read
// once, one byte a weight, and decoded in registers through f16, which
// holds every FP8 value but NaN (B has none): E5M2's bits are the high byte
// of its f16 bits; E4M3's are its f16 bits of the value times 2^-8 (sign to
// bit 15, exponent and mantissa shifted by 7, subnormals included), which
// vcvtph2ps widens exactly; the 2^8 is restored in an MX B's factor
// multiply, else in A's values where A is not MX (the product is the same),
// else by a multiply of its own.
//
// Bitwise equal to the packed path (gemm_driver.h with gemm_fp8.h's
// packing), where the AVX2 tier decodes FP8 to f32 words for either decode
// format: per K block, each C lane runs vfmadd231ps over the same k in the
// same order from zero on the same values (MX factors folded in as an f32
// product, A decoded as the packer decodes it), and the block goes into C as
// the driver puts it there: C (+)= P for MX x MX, else fma(P, sa * sb, C)
// (the first block without accumulate: P * (sa * sb)).
//
// A strip (16 columns) is contiguous over all K. The decode, not DRAM,
// bounds one row here (on Zen 5 a decode-free loop read the codes at 61
// GB/s, the decoding one at 25), so a tile reads as many strips side by
// side as its rows need for independent sums, and 5-8 rows share each
// decoded vector.
#include <cstdint>

#include "anvil/core/intrinsics.h"
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
// Vectors of 8 columns a tile of `rows` (at most 8) reads side by side. Each
// C lane's sum is one chain of dependent FMAs: a row needs 8 chains (4
// strips) to cover the FMA's latency on both pipes, 4 rows have them in one
// strip; 5-8 rows take half a strip (8 columns) at a time with all their
// sums in registers, so each decoded vector serves every row (the other
// half reads the strip again, from L1 or L2).
constexpr int VectorsFor(int64_t rows) { return rows == 1 ? 8 : rows == 2 ? 4 : rows <= 4 ? 2 : 1; }
// Lines a strip is read ahead of its use (4 KiB), into L1, as the AVX-512
// unit; one prefetch per 4 lines (a 64-byte cache line).
constexpr int64_t kPrefetchLines = 256;
constexpr int64_t kLinesPerPrefetch = 4;
// E8M0 codes up to this one have 2^(e - 127) * 2^8 finite: E4M3's MX factor
// and its restoring 2^8 fold into one multiply.
constexpr int kMaxFoldedE8m0 = 246;

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// E4M3 codes (8 or 16 as 16-bit lanes, sign-extended) -> the f16 bits of
// their values times 2^-8: << 7 puts the magnitude at bits 7-13 and the
// sign at 14 and 15; 0xBF80 keeps 15 and 7-13 (subnormals included).
[[gnu::always_inline]] inline __m128i E4m3F16(__m128i w) {
  return _mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16(static_cast<short>(0xBF80)));
}
[[gnu::always_inline]] inline __m256i E4m3F16(__m256i w) {
  return _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(static_cast<short>(0xBF80)));
}

// A line's 16 codes -> v0 (columns 0-7), v1 (8-15): E5M2's values (its bits
// are the high byte of its f16 bits), or E4M3's times 2^-8.
template <bool kE5M2>
[[gnu::always_inline]] inline void DecodeLine(const uint8_t* line, __m256& v0, __m256& v1) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(line));
  if constexpr (kE5M2) {
    const __m128i zero = _mm_setzero_si128();
    v0 = _mm256_cvtph_ps(_mm_unpacklo_epi8(zero, x));
    v1 = _mm256_cvtph_ps(_mm_unpackhi_epi8(zero, x));
  } else {
    const __m256i h = E4m3F16(_mm256_cvtepi8_epi16(x));
    v0 = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
    v1 = _mm256_cvtph_ps(_mm256_extracti128_si256(h, 1));
  }
}
// 8 codes -> their values as DecodeLine's.
template <bool kE5M2>
[[gnu::always_inline]] inline __m256 DecodeHalf(const uint8_t* codes) {
  const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes));
  if constexpr (kE5M2) return _mm256_cvtph_ps(_mm_unpacklo_epi8(_mm_setzero_si128(), x));
  return _mm256_cvtph_ps(E4m3F16(_mm_cvtepi8_epi16(x)));
}

// Fp8Pack::Pow2 of 8 E8M0 codes; `wide` gets the lanes whose factor times
// 2^8 is not finite (codes kMaxFoldedE8m0 + 1 to 254) or'ed in.
__m256 Pow2(const uint8_t* e8m0, __m256i& wide) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e8m0)));
  wide = _mm256_or_si256(
      wide, _mm256_andnot_si256(_mm256_cmpeq_epi32(e, _mm256_set1_epi32(0xFF)),
                                _mm256_cmpgt_epi32(e, _mm256_set1_epi32(kMaxFoldedE8m0))));
  __m256i bits = _mm256_slli_epi32(e, 23);
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000),
                            _mm256_cmpeq_epi32(e, _mm256_setzero_si256()));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7FC00000),
                            _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0xFF)));
  return _mm256_castsi256_ps(bits);
}

using Job = Fp8StreamCall;

// How a decoded vector becomes B's values (the packed path's f32 words): as
// decoded (E5M2; E4M3 with its 2^8 in A), times one factor per column (an
// MX block's, E4M3's folded with 2^8; or 2^8 alone), or times 2^8 and then
// the MX factor (an E4M3 block whose factor * 2^8 would overflow). Each
// product but the last is exact, so every way gives the packed path's values.
enum class Scale { kNone, kFactor, k256ThenFactor };

// Rows [i0, i0 + M) of V vectors of columns over all K into C: strips [s, s +
// V / 2), or (V == 1) the half `half` of strip s.
template <int M, int V, bool kE5M2>
void Tile(const Job& j, int64_t s, int half, int64_t i0, Scale scale) {
  constexpr int S = V == 1 ? 1 : V / 2;  // strips read
  const float* a = j.a_f32 + i0 * j.k;
  // Vector u's first column (its codes sit at col % kStrip in its strip's lines).
  auto col = [&](int u) { return (s + u / 2) * kStrip + 8 * (V == 1 ? half : u % 2); };
  const uint8_t* strip[S];
  for (int t = 0; t < S; ++t) strip[t] = j.b->codes + (s + t) * j.k * kStrip;
  __m256i mask[V];  // C's columns of each vector
  for (int u = 0; u < V; ++u) mask[u] = LaneMask(j.n - col(u));
  alignas(32) float run[M][V * 8] = {};  // C's running sums (set by the first block)
  // Each column's factor (Scale::kFactor and k256ThenFactor): an MX
  // block's, else 2^8 for the whole call.
  alignas(32) float factor[V * 8];
  for (float& f : factor) f = 256.0f;
  const bool mx = j.mx_block > 0;
  for (int64_t kb = 0; kb < j.kblocks; ++kb) {
    const int64_t k0 = kb * j.kblock, k1 = Min(k0 + j.kblock, j.k);
    // The sums live in registers: every loop over them is unrolled.
    __m256 acc[M][V];
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i)
#pragma GCC unroll 8
      for (int u = 0; u < V; ++u) acc[i][u] = _mm256_setzero_ps();
    // Lines [r, stop) into the sums, each decoded vector scaled as kScale says.
    // (Inlined, so the sums stay in registers: behind a call they went
    // through the stack every few lines.)
    auto lines = [&]<Scale kScale>(int64_t r, int64_t stop) [[gnu::always_inline]] {
      // The factors, read from memory at each use: held in registers beside
      // 8 vectors' sums they pushed the sums onto the stack.
      const float* fac = factor;
      // Vector u's values at line q into the sums.
      auto fma = [&](int u, __m256 v, int64_t q) [[gnu::always_inline]] {
        if constexpr (kScale == Scale::k256ThenFactor) v = _mm256_mul_ps(v, _mm256_set1_ps(256.0f));
        if constexpr (kScale != Scale::kNone) v = _mm256_mul_ps(v, _mm256_load_ps(fac + 8 * u));
#pragma GCC unroll 8
        for (int i = 0; i < M; ++i) {
          acc[i][u] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + i * j.k + q), v, acc[i][u]);
        }
      };
      auto line = [&](int64_t q) [[gnu::always_inline]] {
        if constexpr (V == 1) {
          fma(0, DecodeHalf<kE5M2>(strip[0] + q * kStrip + 8 * half), q);
        } else {
#pragma GCC unroll 4
          for (int t = 0; t < S; ++t) {
            __m256 v0, v1;
            DecodeLine<kE5M2>(strip[t] + q * kStrip, v0, v1);
            fma(2 * t, v0, q);
            fma(2 * t + 1, v1, q);
          }
        }
      };
      for (; r + kLinesPerPrefetch <= stop; r += kLinesPerPrefetch) {
        asm("" : "+r"(fac));  // (the compiler no longer knows the loads repeat)
        for (int t = 0; t < S; ++t) {
          // An address computed as an integer: past the stream's end it is
          // no pointer into it.
          _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(strip[t]) +
                                                     (r + kPrefetchLines) * kStrip),
                       _MM_HINT_T0);
        }
#pragma GCC unroll 4
        for (int64_t q = r; q < r + kLinesPerPrefetch; ++q) line(q);
      }
      for (; r < stop; ++r) line(r);
    };
    for (int64_t r = k0; r < k1;) {
      int64_t stop = k1;
      Scale block_scale = scale;
      if (mx) {  // a run of one MX block, with its factors
        const int64_t mb = r / j.mx_block;
        __m256i wide = _mm256_setzero_si256();
        __m256 f[V];
        for (int u = 0; u < V; ++u) {
          const int64_t c = col(u);
          f[u] = Pow2(j.b->e8m0 + ((c / kStrip) * j.mx_blocks + mb) * kStrip + c % kStrip, wide);
        }
        const bool fold = !kE5M2 && _mm256_testz_si256(wide, wide);
        if (!kE5M2 && !fold) block_scale = Scale::k256ThenFactor;
        for (int u = 0; u < V; ++u) {
          _mm256_store_ps(factor + 8 * u,
                          fold ? _mm256_mul_ps(f[u], _mm256_set1_ps(256.0f)) : f[u]);
        }
        stop = Min(stop, (mb + 1) * j.mx_block);
      }
      switch (block_scale) {
        case Scale::kNone:
          lines.template operator()<Scale::kNone>(r, stop);
          break;
        case Scale::kFactor:
          lines.template operator()<Scale::kFactor>(r, stop);
          break;
        case Scale::k256ThenFactor:  // E4M3 only (E5M2 has no 2^8 to restore)
          if constexpr (!kE5M2) {
            lines.template operator()<Scale::k256ThenFactor>(r, stop);
          } else {
            __builtin_unreachable();
          }
          break;
      }
      r = stop;
    }
    // The block into C's running sums, as the driver puts a block's tile into C.
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
      for (int u = 0; u < V; ++u) {
        float* rs = &run[i][8 * u];
        const __m256 p = acc[i][u];
        const bool first = kb == 0;
        const __m256 prev = first ? _mm256_maskload_ps(j.c + (i0 + i) * j.ldc + col(u), mask[u])
                                  : _mm256_load_ps(rs);
        __m256 x;
        if (j.scaled) {
          const int64_t c = col(u);
          const float* sb = j.b->factors + ((c / kStrip) * j.kblocks + kb) * kStrip + c % kStrip;
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
    for (int u = 0; u < V; ++u) {
      _mm256_maskstore_ps(j.c + (i0 + i) * j.ldc + col(u), mask[u], _mm256_load_ps(&run[i][8 * u]));
    }
  }
}

// Rows [i0, i0 + M) of strips [s0, s1): tiles of VectorsFor(M) vectors,
// then of fewer (whole strips), or each strip's two halves.
template <int M, bool kE5M2>
void Strips(const Job& j, int64_t s0, int64_t s1, Scale scale) {
  constexpr int kV = VectorsFor(M);
  int64_t s = s0;
  if constexpr (kV == 1) {
    for (; s < s1; ++s) {
      for (int half = 0; half < 2; ++half) Tile<M, 1, kE5M2>(j, s, half, 0, scale);
    }
    return;
  }
  if constexpr (kV >= 8) {
    for (; s + 4 <= s1; s += 4) Tile<M, 8, kE5M2>(j, s, 0, 0, scale);
  }
  if constexpr (kV >= 4) {
    for (; s + 2 <= s1; s += 2) Tile<M, 4, kE5M2>(j, s, 0, 0, scale);
  }
  for (; s < s1; ++s) Tile<M, 2, kE5M2>(j, s, 0, 0, scale);
}

template <bool kE5M2>
void Columns(const Job& j, int64_t s0, int64_t s1, Scale scale) {
  switch (j.m) {
    case 1:
      return Strips<1, kE5M2>(j, s0, s1, scale);
    case 2:
      return Strips<2, kE5M2>(j, s0, s1, scale);
    case 3:
      return Strips<3, kE5M2>(j, s0, s1, scale);
    case 4:
      return Strips<4, kE5M2>(j, s0, s1, scale);
    case 5:
      return Strips<5, kE5M2>(j, s0, s1, scale);
    case 6:
      return Strips<6, kE5M2>(j, s0, s1, scale);
    case 7:
      return Strips<7, kE5M2>(j, s0, s1, scale);
    case 8:
      return Strips<8, kE5M2>(j, s0, s1, scale);
    default:
      __builtin_trap();  // the stream takes at most kDecodeChunkRows rows
  }
}

}  // namespace

void DecodeFp8Region(const Problem& p, const Region& r, std::byte* scratch) {
  const Fp8Problem& f = *p.fp8;
  const bool e5m2 = f.b.format == Fp8Format::kE5M2, mx = f.b.scaling == Fp8Scaling::kMx;
  // E4M3's restoring 2^8: in an MX B's factors (Tile folds it there), else
  // in A's values where A is not MX (then exact), else in a factor of 2^8.
  const bool gain_in_a = !e5m2 && !mx && f.a.scaling != Fp8Scaling::kMx;
  // This tier's packed path decodes FP8 to f32 words for either decode format.
  const Job j = Fp8::StreamCall(p, /*pairs=*/false, scratch, gain_in_a ? 256.0f : 1.0f);
  const Scale scale = mx || !(e5m2 || gain_in_a) ? Scale::kFactor : Scale::kNone;
  const int64_t s0 = r.n0 / kStrip, s1 = (r.n1 + kStrip - 1) / kStrip;
  e5m2 ? Columns<true>(j, s0, s1, scale) : Columns<false>(j, s0, s1, scale);
}

}  // namespace anvil::kernels::gemm_internal::avx2
