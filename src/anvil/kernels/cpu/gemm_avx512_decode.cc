// AVX-512 GEMM streaming path for small M (decode) with B = [k, n] as stored:
// B is read once, straight from memory, never packed. Bitwise equal to the
// packed path: per K block the same instruction (vfmadd231ps, or vdpbf16ps on
// the same (2j, 2j+1) pairs) runs on each C lane in the same order from zero,
// and block sums are added in the same order. Lane positions may differ
// (bf16 pairs are built with in-lane unpacks and un-permuted at the end);
// lane arithmetic does not depend on position.
//
// Access order, for DRAM: C columns are cut into panels a few thousand
// floats wide (M x width partials fit in L1); a panel is swept in groups of
// 16 B rows, each group row read end to end across the panel (long
// sequential runs), by register strips whose sums park in L1 between groups.
#include <cstring>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_avx512.h"

namespace anvil::kernels::gemm_internal::avx512 {
namespace {

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
__mmask16 Mask16(int64_t n) {
  return n >= 16 ? 0xFFFF : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1u);
}
__mmask32 Mask32(int64_t n) {
  return n >= 32 ? 0xFFFFFFFFu : n <= 0 ? 0 : static_cast<__mmask32>((1u << n) - 1u);
}

__m512 LoadC(const Problem& p, int64_t i, int64_t j, __mmask16 m) {
  if (!p.bf16_out) return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p.c) + i * p.ldc + j);
  const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const BF16*>(p.c) + i * p.ldc + j);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// As gemm_avx512.cc: RNE to bf16, NaN -> 0x7FFF.
void StoreC(const Problem& p, int64_t i, int64_t j, __mmask16 m, __m512 x) {
  if (!p.bf16_out) {
    _mm512_mask_storeu_ps(static_cast<float*>(p.c) + i * p.ldc + j, m, x);
    return;
  }
  const __m512i u = _mm512_castps_si512(x);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)),
                              _mm512_set1_epi32(0x7F800000));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FFF));
  _mm256_mask_storeu_epi16(static_cast<BF16*>(p.c) + i * p.ldc + j, m, _mm512_cvtepi32_epi16(r));
}

// B rows per sweep of a panel (f32: 16 k; bf16: 8 pairs). Partials reload
// once per group: 1/16 of the FMA work.
constexpr int64_t kGroup = 16;
// B larger than this streams from DRAM: sweep panels in groups of kGroup
// rows and prefetch the next group (measured: 1x32768x4096 f32 on 2 threads
// 45 GB/s against 38 without). Smaller B is cache-resident; there, strips
// that run down a whole K block without prefetches are faster (1x768x768:
// 126 GB/s against 105). Both measured with 256-k blocks.
constexpr int64_t kStreamingBytes = int64_t{8} << 20;
// Floats of f32 partials per buffer (block sum and running sum): 2 x 12 KiB.
constexpr int64_t kPartialFloats = 3072;
// A bf16 B from DRAM at 7-8 rows of A (one 32-column strip): panels twice
// as wide (the block sums the groups come back to, 24 KiB, half of Zen 5's
// 48 KiB L1; the running sums, as large, are touched once a K block), so
// each B row is read in runs of 1536 bytes at 8 rows, as f32 reads
// its, instead of 768. On 2 threads, paired medians of 5-6 alternating runs
// (Zen 5, whose DRAM bandwidth moves 2x from minute to minute): 8 x 32768 x
// 4096 1.07-1.40x in four series, 7 x 32768 x 4096 1.20x, 8 x 4096 and 14336
// x 4096 0.96-1.11x; fewer rows, whose runs are 1-6 KiB already, gained
// nothing sure (1-6 rows 0.92-1.06x).
constexpr int64_t kDramBf16PartialFloats = 2 * kPartialFloats;

// ---- f32 ----------------------------------------------------------------------

// Rows [k0, k1) of B's strip (16*NV columns at b) into M x NV partials at
// part (row stride ld), in increasing k.
template <int M, int NV, bool kEdge, bool kTransA, bool kPrefetch>
[[gnu::always_inline]] inline void GroupF32(const float* a, int64_t lda, const float* b,
                                            int64_t ldb, int64_t k0, int64_t k1,
                                            const __mmask16* mask, float* part, int64_t ld) {
  __m512 acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_load_ps(part + i * ld + 16 * v);
  }
  for (int64_t k = k0; k < k1; ++k) {
    const float* brow = b + k * ldb;
    __m512 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      // The next group's line of this strip: one panel sweep ahead, into L2.
      if (kPrefetch) _mm_prefetch(reinterpret_cast<const char*>(brow + kGroup * ldb + 16 * v), _MM_HINT_T1);
      bv[v] = kEdge ? _mm512_maskz_loadu_ps(mask[v], brow + 16 * v) : _mm512_loadu_ps(brow + 16 * v);
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m512 av = _mm512_set1_ps(kTransA ? a[k * lda + i] : a[i * lda + k]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm512_store_ps(part + i * ld + 16 * v, acc[i][v]);
  }
}

// C[0:M, j0:j0+w] for one panel; acc and run hold M x ld floats each.
template <int M, int NV, bool kTransA, bool kPrefetch>
void PanelF32(const Problem& p, int64_t j0, int64_t w, float* acc, float* run) {
  const int64_t group = kPrefetch ? kGroup : kKcF32;
  constexpr int64_t kStrip = 16 * NV;
  const float* a = static_cast<const float*>(p.a);
  const float* b = static_cast<const float*>(p.b) + j0;
  const int64_t full = w / kStrip, tail = w - full * kStrip;
  const int64_t ld = (full + (tail > 0)) * kStrip;
  __mmask16 tail_mask[NV];
  for (int v = 0; v < NV; ++v) tail_mask[v] = Mask16(tail - 16 * v);
  for (int64_t pc = 0; pc < p.k; pc += kKcF32) {
    const int64_t kend = Min(pc + kKcF32, p.k);
    std::memset(acc, 0, M * ld * sizeof(float));
    for (int64_t kg = pc; kg < kend; kg += group) {
      const int64_t kg_end = Min(kg + group, kend);
      for (int64_t s = 0; s < full; ++s) {
        GroupF32<M, NV, false, kTransA, kPrefetch>(a, p.lda, b + s * kStrip, p.ldb, kg, kg_end, nullptr,
                                        acc + s * kStrip, ld);
      }
      if (tail > 0) {
        GroupF32<M, NV, true, kTransA, kPrefetch>(a, p.lda, b + full * kStrip, p.ldb, kg, kg_end, tail_mask,
                                       acc + full * kStrip, ld);
      }
    }
    // Fold the block sum into the running sum, as the packed path folds C.
    for (int i = 0; i < M; ++i) {
      for (int64_t j = 0; j < w; j += 16) {
        const __m512 x = _mm512_load_ps(acc + i * ld + j);
        __m512* r = reinterpret_cast<__m512*>(run + i * ld + j);
        if (pc > 0) {
          *r = _mm512_add_ps(*r, x);
        } else if (p.accumulate) {
          *r = _mm512_add_ps(LoadC(p, i, j0 + j, Mask16(w - j)), x);
        } else {
          *r = x;
        }
      }
    }
  }
  for (int i = 0; i < M; ++i)
    for (int64_t j = 0; j < w; j += 16) StoreC(p, i, j0 + j, Mask16(w - j), _mm512_load_ps(run + i * ld + j));
}

// ---- bf16 ---------------------------------------------------------------------

// unpacklo/hi_epi16 of rows (k, k+1) give, per 128-bit lane L, the pairs of
// columns 8L+0..3 (lo) and 8L+4..7 (hi). Unpermute puts 32 columns back in
// order; Permute is its inverse. (Built per call: a namespace-scope vector
// constant would run AVX-512 code at program start on any CPU.)
__m512 Unpermute(__m512 lo, __m512 hi, int half) {
  const __m512i idx = half == 0
      ? _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23)
      : _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  return _mm512_permutex2var_ps(lo, idx, hi);
}
__m512 Permute(__m512 c0, __m512 c1, bool hi) {
  const __m512i idx = !hi
      ? _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27)
      : _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  return _mm512_permutex2var_ps(c0, idx, c1);
}

// A's k-pair (k, k+1) of row i as a broadcast 32-bit word (even k low);
// kHasHi false: k + 1 == K and the high half is zero, as the packed A has it.
template <bool kTransA, bool kHasHi>
[[gnu::always_inline]] inline __m512bh PairA(const BF16* a, int64_t lda, int i, int64_t k) {
  uint32_t w;
  if constexpr (!kTransA && kHasHi) {
    std::memcpy(&w, a + i * lda + k, 4);
  } else {
    const uint32_t lo = kTransA ? a[k * lda + i].bits : a[i * lda + k].bits;
    const uint32_t hi = !kHasHi ? 0 : kTransA ? a[(k + 1) * lda + i].bits : a[i * lda + k + 1].bits;
    w = lo | hi << 16;
  }
  return (__m512bh)_mm512_set1_epi32(static_cast<int>(w));
}

// One k-pair step: rows k (and k+1 if kHasHi) of B against M broadcast pairs.
template <int M, int NC, bool kEdge, bool kTransA, bool kHasHi, bool kPrefetch>
[[gnu::always_inline]] inline void PairStep(const BF16* a, int64_t lda, const BF16* b,
                                            int64_t ldb, int64_t k, const __mmask32* mask,
                                            __m512 (&acc)[M][2 * NC]) {
  __m512bh w[M];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) w[i] = PairA<kTransA, kHasHi>(a, lda, i, k);
  const BF16* row0 = b + k * ldb;
#pragma GCC unroll 8
  for (int c = 0; c < NC; ++c) {
    const BF16* x0 = row0 + 32 * c;
    // The next group's lines of this strip: one panel sweep ahead, into L2.
    if (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(x0 + kGroup * ldb), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(x0 + (kGroup + 1) * ldb), _MM_HINT_T1);
    }
    const __m512i r0 = kEdge ? _mm512_maskz_loadu_epi16(mask[c], x0) : _mm512_loadu_si512(x0);
    __m512i r1 = _mm512_setzero_si512();
    if constexpr (kHasHi) {
      r1 = kEdge ? _mm512_maskz_loadu_epi16(mask[c], x0 + ldb) : _mm512_loadu_si512(x0 + ldb);
    }
    const __m512bh lo = (__m512bh)_mm512_unpacklo_epi16(r0, r1);
    const __m512bh hi = (__m512bh)_mm512_unpackhi_epi16(r0, r1);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      acc[i][2 * c] = _mm512_dpbf16_ps(acc[i][2 * c], w[i], lo);
      acc[i][2 * c + 1] = _mm512_dpbf16_ps(acc[i][2 * c + 1], w[i], hi);
    }
  }
}

// Rows [k0, k1) of a 32*NC-column strip (k0 - block start even; k1 odd only
// at K's end) into M x 2NC partials in [lo, hi] lane order.
template <int M, int NC, bool kEdge, bool kTransA, bool kPrefetch>
[[gnu::always_inline]] inline void GroupBf16(const BF16* a, int64_t lda, const BF16* b,
                                             int64_t ldb, int64_t k0, int64_t k1,
                                             const __mmask32* mask, float* part, int64_t ld) {
  __m512 acc[M][2 * NC];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < 2 * NC; ++v) acc[i][v] = _mm512_load_ps(part + i * ld + 16 * v);
  }
  int64_t k = k0;
  for (; k + 1 < k1; k += 2) {
    PairStep<M, NC, kEdge, kTransA, true, kPrefetch>(a, lda, b, ldb, k, mask, acc);
  }
  if (k < k1) PairStep<M, NC, kEdge, kTransA, false, false>(a, lda, b, ldb, k, mask, acc);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < 2 * NC; ++v) _mm512_store_ps(part + i * ld + 16 * v, acc[i][v]);
  }
}

template <int M, int NC, bool kTransA, bool kPrefetch>
void PanelBf16(const Problem& p, int64_t j0, int64_t w, float* acc, float* run) {
  const int64_t group = kPrefetch ? kGroup : kKcBf16;
  constexpr int64_t kStrip = 32 * NC;
  const BF16* a = static_cast<const BF16*>(p.a);
  const BF16* b = static_cast<const BF16*>(p.b) + j0;
  const int64_t full = w / kStrip, tail = w - full * kStrip;
  const int64_t ld = (full + (tail > 0)) * kStrip;
  __mmask32 tail_mask[NC];
  for (int c = 0; c < NC; ++c) tail_mask[c] = Mask32(tail - 32 * c);
  for (int64_t pc = 0; pc < p.k; pc += kKcBf16) {
    const int64_t kend = Min(pc + kKcBf16, p.k);
    std::memset(acc, 0, M * ld * sizeof(float));
    for (int64_t kg = pc; kg < kend; kg += group) {
      const int64_t kg_end = Min(kg + group, kend);
      for (int64_t s = 0; s < full; ++s) {
        GroupBf16<M, NC, false, kTransA, kPrefetch>(a, p.lda, b + s * kStrip, p.ldb, kg, kg_end, nullptr,
                                         acc + s * kStrip, ld);
      }
      if (tail > 0) {
        GroupBf16<M, NC, true, kTransA, kPrefetch>(a, p.lda, b + full * kStrip, p.ldb, kg, kg_end, tail_mask,
                                        acc + full * kStrip, ld);
      }
    }
    // Fold per 32-column chunk [lo, hi]; C's old value is permuted to match.
    for (int i = 0; i < M; ++i) {
      for (int64_t j = 0; j < w; j += 32) {
        float* r = run + i * ld + j;
        const float* x = acc + i * ld + j;
        for (int h = 0; h < 2; ++h) {
          __m512 v = _mm512_load_ps(x + 16 * h);
          if (pc > 0) {
            v = _mm512_add_ps(_mm512_load_ps(r + 16 * h), v);
          } else if (p.accumulate) {
            const __m512 c0 = LoadC(p, i, j0 + j, Mask16(w - j));
            const __m512 c1 = LoadC(p, i, j0 + j + 16, Mask16(w - j - 16));
            v = _mm512_add_ps(Permute(c0, c1, h == 1), v);
          }
          _mm512_store_ps(r + 16 * h, v);
        }
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int64_t j = 0; j < w; j += 32) {
      const __m512 lo = _mm512_load_ps(run + i * ld + j), hi = _mm512_load_ps(run + i * ld + j + 16);
      StoreC(p, i, j0 + j, Mask16(w - j), Unpermute(lo, hi, 0));
      StoreC(p, i, j0 + j + 16, Mask16(w - j - 16), Unpermute(lo, hi, 1));
    }
  }
}

// Register strips keep M x strip accumulators within 24 of the 32 zmm; the
// panel is as wide as kPartialFloats (bf16 from DRAM at 7-8 rows:
// kDramBf16PartialFloats) allows for M rows.
template <int M, bool kTransA, bool kPrefetch>
void Rows(const Problem& p, const Region& r, float* acc, float* run) {
  if (p.bf16_in) {
    constexpr int kNc = M <= 3 ? 4 : M == 4 ? 3 : M <= 6 ? 2 : 1;
    constexpr int64_t kFloats = kPrefetch && kNc == 1 ? kDramBf16PartialFloats : kPartialFloats;
    constexpr int64_t kWidth = kFloats / M / (32 * kNc) * (32 * kNc);
    for (int64_t j = r.n0; j < r.n1; j += kWidth) {
      PanelBf16<M, kNc, kTransA, kPrefetch>(p, j, Min(kWidth, r.n1 - j), acc, run);
    }
    return;
  }
  constexpr int kNv = M <= 3 ? 8 : M == 4 ? 6 : M <= 6 ? 4 : 3;
  constexpr int64_t kWidth = kPartialFloats / M / (16 * kNv) * (16 * kNv);
  for (int64_t j = r.n0; j < r.n1; j += kWidth) {
    PanelF32<M, kNv, kTransA, kPrefetch>(p, j, Min(kWidth, r.n1 - j), acc, run);
  }
}

template <int M>
void Rows(const Problem& p, const Region& r, float* acc, float* run) {
  const bool streaming = p.b_from_dram || p.k * p.n * (p.bf16_in ? 2 : 4) > kStreamingBytes;
  if (p.trans_a) {
    streaming ? Rows<M, true, true>(p, r, acc, run) : Rows<M, true, false>(p, r, acc, run);
  } else {
    streaming ? Rows<M, false, true>(p, r, acc, run) : Rows<M, false, false>(p, r, acc, run);
  }
}

}  // namespace

void DecodeRegion(const Problem& p, const Region& r, std::byte* scratch) {
  if (p.m > kDecodeChunkRows) {
    // Chunks of rows, each streaming the region's B again (from cache): a
    // row's sums are the same whichever chunk holds it.
    for (int64_t i0 = 0; i0 < p.m; i0 += kDecodeChunkRows) {
      DecodeRegion(RowSlice(p, i0, Min(kDecodeChunkRows, p.m - i0)), r, scratch);
    }
    return;
  }
  float* acc = reinterpret_cast<float*>(scratch);
  float* run = acc + kDramBf16PartialFloats;
  switch (p.m) {
    case 1: return Rows<1>(p, r, acc, run);
    case 2: return Rows<2>(p, r, acc, run);
    case 3: return Rows<3>(p, r, acc, run);
    case 4: return Rows<4>(p, r, acc, run);
    case 5: return Rows<5>(p, r, acc, run);
    case 6: return Rows<6>(p, r, acc, run);
    case 7: return Rows<7>(p, r, acc, run);
    case 8: return Rows<8>(p, r, acc, run);
    default: __builtin_trap();  // the dispatcher sends only M <= decode_max_m
  }
}

}  // namespace anvil::kernels::gemm_internal::avx512
