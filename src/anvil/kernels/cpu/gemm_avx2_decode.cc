// AVX2 GEMM streaming path for small M (decode) with B = [k, n] as stored:
// B is read straight from memory, never packed. Bitwise equal to the packed
// path (gemm_avx2.cc): per K block each C lane runs the same vfmadd231ps
// chain from zero in increasing k, bf16 widened exactly to f32 as packing
// does, and block sums are added to the running sum in the same order.
//
// Access order, as the AVX-512 unit's: C columns are cut into panels whose
// M x width partials fit in L1; a panel is swept in groups of B rows,
// each group row read end to end across the panel (long sequential runs), by
// register strips whose sums park in L1 between groups. Every loop touching
// the accumulators is unrolled, so they live in registers.
#include <cstring>
#include <type_traits>

#include "anvil/kernels/cpu/gemm_avx2.h"

namespace anvil::kernels::gemm_internal::avx2 {
namespace {

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
// Eight B values as f32: whole, or (kEdge) the lanes of `mask` (f32) / the
// first n (bf16).
template <bool kEdge>
[[gnu::always_inline]] inline __m256 LoadB(const float* p, __m256i mask, int64_t) {
  return kEdge ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}
template <bool kEdge>
[[gnu::always_inline]] inline __m256 LoadB(const BF16* p, __m256i, int64_t n) {
  return Load8(p, kEdge ? n : 8);
}

// B rows per sweep of a panel; partials reload once per group.
constexpr int64_t kGroup = 16;
// Rows of B whose stride is a multiple of 4 KiB (N a multiple of 1024 f32 or
// 2048 bf16: 4096, 14336) all fall in one set of L1 (64 sets of 64 bytes on
// Zen 3 and Zen 5), and a group's 16 lines, with the next group's asked for
// at the same sets of L2, evict one another. From DRAM, 4-8 rows of such a
// B go in half groups (ANVIL_ISA=avx2 on a Zen 5, 2 threads, K 4096, N 4096
// and 14336, paired medians of 5 alternating runs: bf16 1.07-1.26x, f32
// 1.13-1.25x; 1-3 rows level, so kept whole). Strides of 2 KiB (8 lines to
// a set) count as crowded too; unmeasured.
bool CrowdsL1Sets(int64_t row_bytes) {
  constexpr int kSets = 64, kLine = 64;
  bool seen[kSets] = {};
  int sets = 0;
  for (int64_t r = 0; r < kGroup; ++r) {
    const int64_t set = r * row_bytes / kLine % kSets;
    sets += !seen[set];
    seen[set] = true;
  }
  return sets < 4;  // more than 4 of the group's lines to a set
}
// B larger than this streams from DRAM: prefetch the next group's lines
// (as the AVX-512 unit; below it, strips run down a whole K block). 8 MiB
// before a real Zen 3 (32 MiB of L3) measured f32 B of 9-11 MiB faster
// walked from L3 (paired medians of 7 alternating runs, 2 threads: 2, 4
// and 8 x 3072 x 768 1.23x, 1.17x, 1.18x; 8 x 768 x 3072 1.06x; 8 x 2752 x
// 1024 1.04x; bf16 level) and 16 MiB slower (8 x 4096 x 1024 0.83x).
constexpr int64_t kStreamingBytes = int64_t{12} << 20;
// One row of A reads each B element once, so where B sits picks the walk.
// From DRAM (past the L3 of one Zen CCD, 32 MiB, as infer's
// kCachedWeightBytes): groups of kGroup with prefetches. From L3 (a thread's
// part of B past the 1 MiB L2 of a Zen 5 core): no prefetches, which only
// got in the hardware prefetchers' way, and groups of 3 KiB of B per strip
// (8 f32 or 16 bf16 rows), fewer rows read at once. From L2: as above,
// strips down a whole K block. Against the walks of M > 1 (ANVIL_ISA=avx2
// on a Zen 5, 2 threads): f32 1x768x3072 +31%, 1x1024x1024 +24%, 1x3072x768
// +9%, bf16 1x3072x768 +11%, the rest level; shorter groups (2-4 rows) lost
// in bf16, prefetches from L3 lost 15-30%, no prefetches from DRAM 10%.
// On a real AVX2 host (Zen 3, L2 512 KiB) f32 groups four times longer (32
// rows, 12 KiB of B per strip) won while B is well inside the L3 (median
// paired ratios of 7 alternating runs, 2 threads: 1x768x3072 1.26x,
// 1x768x768 1.27x, 1x512x1376 1.08x, 1x2752x512 1.05x, 1x3072x768 level)
// and lost from 16 MiB on (1x16384x512, 32 MiB: 0.73x): there a strip's
// rows, a page or more apart, are more streams than the prefetchers follow.
// bf16 rows four times as many (64) came out level (1.09x to 0.94x by shape).
constexpr int64_t kOneRowStreamingBytes = int64_t{32} << 20;
constexpr int64_t kOneRowL2Bytes = int64_t{1} << 20;
constexpr int64_t kOneRowLongGroupBytes = int64_t{16} << 20;  // B below this: f32 long groups
template <typename T>
constexpr int64_t kOneRowGroup = 32 / sizeof(T);
template <typename T>
constexpr int64_t kOneRowLongGroup =
    std::is_same_v<T, float> ? 4 * kOneRowGroup<T> : kOneRowGroup<T>;
// Floats of f32 partials per buffer (block sum and running sum): 2 x 8 KiB,
// within the 32 KiB L1 of AVX2 parts (a bf16 A's widened block adds 8 KiB).
constexpr int64_t kPartialFloats = 2048;

// Group (below) for one row of A: each B vector feeds a single FMA, so it is
// loaded into it, and the 16 ymm hold twice the accumulators (more FMA chains
// in flight per B row). a_step: A's stride from k to k + 1.
template <typename T, int NV, bool kEdge, bool kPrefetch>
[[gnu::always_inline]] inline void GroupOneRow(const float* a, int64_t a_step, const T* b,
                                               int64_t ldb, int64_t n, int64_t tail, float* part) {
  __m256 acc[NV];
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) acc[v] = _mm256_load_ps(part + 8 * v);
  for (int64_t k = 0; k < n; ++k) {
    const T* brow = b + k * ldb;
    const __m256 av = _mm256_broadcast_ss(a + k * a_step);
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if (kPrefetch && v * 8 * sizeof(T) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(brow + kGroup * ldb + 8 * v), _MM_HINT_T1);
      }
      const __m256 bv =
          LoadB<kEdge>(brow + 8 * v, kEdge ? LaneMask(tail - 8 * v) : __m256i{}, tail - 8 * v);
      acc[v] = _mm256_fmadd_ps(av, bv, acc[v]);
    }
  }
#pragma GCC unroll 16
  for (int v = 0; v < NV; ++v) _mm256_store_ps(part + 8 * v, acc[v]);
}

// B rows [0, n) of a strip (8*NV columns at b, `tail` valid if kEdge) into
// M x NV partials at part (row stride ld), in increasing k; `a` (f32) points
// at the same k.
template <typename T, int M, int NV, bool kEdge, bool kTransA, bool kPrefetch>
[[gnu::always_inline]] inline void Group(const float* a, int64_t lda, const T* b, int64_t ldb,
                                         int64_t n, int64_t tail, float* part, int64_t ld) {
  if constexpr (M == 1) {
    return GroupOneRow<T, NV, kEdge, kPrefetch>(a, kTransA ? lda : 1, b, ldb, n, tail, part);
  } else if constexpr (M > 4 && NV == 3) {
    // (Rows' two passes: 7-8 bf16 rows, 3 vectors wide.) Rows 0-3, then the
    // rest, over the same B rows, from L1 the second time.
    Group<T, 4, NV, kEdge, kTransA, kPrefetch>(a, lda, b, ldb, n, tail, part, ld);
    return Group<T, M - 4, NV, kEdge, kTransA, kPrefetch>(a + 4 * (kTransA ? 1 : lda), lda, b, ldb,
                                                          n, tail, part + 4 * ld, ld);
  }
  __m256i mask[NV];
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) mask[v] = LaneMask(tail - 8 * v);
  __m256 acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_load_ps(part + i * ld + 8 * v);
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* brow = b + k * ldb;
    __m256 bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      // The line kGroup rows on in this strip: one panel sweep ahead (two in
      // half groups), into L2.
      if (kPrefetch && v * 8 * sizeof(T) % 64 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(brow + kGroup * ldb + 8 * v), _MM_HINT_T1);
      }
      bv[v] = LoadB<kEdge>(brow + 8 * v, mask[v], tail - 8 * v);
    }
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_broadcast_ss(kTransA ? a + k * lda + i : a + i * lda + k);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) _mm256_store_ps(part + i * ld + 8 * v, acc[i][v]);
  }
}

// Scratch of the streaming path, in floats: the block sums and the running
// sums of a panel (M x width each), and a bf16 A's K block widened to f32.
struct Buffers {
  float* acc;
  float* run;
  float* a;  // [kDecodeChunkRows][kc]
};

// C[0:M, j0:j0+w] for one panel, swept `group` B rows at a time.
template <typename T, int M, int NV, bool kTransA, bool kPrefetch>
void Panel(const Problem& p, int64_t j0, int64_t w, int64_t group, const Buffers& buf) {
  constexpr int64_t kKc = kAvx2.kc;
  constexpr int64_t kStrip = 8 * NV;
  const T* b = static_cast<const T*>(p.b) + j0;
  const int64_t full = w / kStrip, tail = w - full * kStrip;
  const int64_t ld = (full + (tail > 0)) * kStrip;
  float* acc = buf.acc;
  float* run = buf.run;
  for (int64_t pc = 0; pc < p.k; pc += kKc) {
    const int64_t kend = Min(pc + kKc, p.k);
    // A's K block as f32: read in place, or (bf16) widened once into buf.a,
    // rows k-contiguous, so the inner loop broadcasts straight from memory.
    const float* a = static_cast<const float*>(p.a) + (kTransA ? pc * p.lda : pc);
    int64_t lda = p.lda;
    constexpr bool kTransF32 = kTransA && std::is_same_v<T, float>;
    if constexpr (std::is_same_v<T, BF16>) {
      const BF16* src = static_cast<const BF16*>(p.a);
      if constexpr (kTransA) {
        for (int64_t k = pc; k < kend; ++k) {
          float row[M];
          WidenRow(src + k * p.lda, row, M);
          for (int i = 0; i < M; ++i) buf.a[i * kKc + k - pc] = row[i];
        }
      } else {
        for (int i = 0; i < M; ++i) WidenRow(src + i * p.lda + pc, buf.a + i * kKc, kend - pc);
      }
      a = buf.a;
      lda = kKc;
    }
    std::memset(acc, 0, M * ld * sizeof(float));
    for (int64_t kg = pc; kg < kend; kg += group) {
      const int64_t n = Min(kg + group, kend) - kg;
      const float* ag = a + (kTransF32 ? (kg - pc) * lda : kg - pc);
      const T* bg = b + kg * p.ldb;
      for (int64_t s = 0; s < full; ++s) {
        Group<T, M, NV, false, kTransF32, kPrefetch>(ag, lda, bg + s * kStrip, p.ldb, n, kStrip,
                                                     acc + s * kStrip, ld);
      }
      if (tail > 0) {
        Group<T, M, NV, true, kTransF32, kPrefetch>(ag, lda, bg + full * kStrip, p.ldb, n, tail,
                                                    acc + full * kStrip, ld);
      }
    }
    // Fold the block sum into the running sum, as the packed path folds C.
    for (int i = 0; i < M; ++i) {
      float* r = run + i * ld;
      const float* x = acc + i * ld;
      if (pc > 0) {  // lanes past w hold sums of zero columns: computed, never stored
        for (int64_t j = 0; j < ld; j += 8) {
          _mm256_store_ps(r + j, _mm256_add_ps(_mm256_load_ps(r + j), _mm256_load_ps(x + j)));
        }
      } else if (p.accumulate) {
        const int64_t at = i * p.ldc + j0;
        if (p.bf16_out) {
          WidenRow(static_cast<const BF16*>(p.c) + at, r, w);
        } else {
          std::memcpy(r, static_cast<const float*>(p.c) + at, w * sizeof(float));
        }
        for (int64_t j = 0; j < w; ++j) r[j] += x[j];
        std::memcpy(r + w, x + w, (ld - w) * sizeof(float));
      } else {
        std::memcpy(r, x, ld * sizeof(float));
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    const float* r = run + i * ld;
    const int64_t at = i * p.ldc + j0;
    if (p.bf16_out) {
      RoundRow(r, static_cast<BF16*>(p.c) + at, w);
    } else {
      std::memcpy(static_cast<float*>(p.c) + at, r, w * sizeof(float));
    }
  }
}

// Register strips keep M x NV accumulators, NV B vectors and a broadcast
// within the 16 ymm (one row: 12 accumulators, B loaded into the FMAs); the
// panel is as wide as kPartialFloats allows.
template <typename T, int M, bool kTransA, bool kPrefetch>
void Rows(const Problem& p, const Region& r, const Buffers& buf) {
  // bf16 at 7-8 rows: two passes of 4 rows, 24 columns wide (Group); f32
  // keeps one pass 8 wide (on a Zen 3, 7 alternating runs, 2 threads: bf16
  // 8 x 768 x 3072 1.15x, 8 x 3072 x 768 1.14x, 8 x 768 x 768 1.12x, 8 x
  // 16384 x 512 1.34x, the rest 1.01-1.22x; f32 0.79-1.06x, 5-6 rows so
  // split 0.62-0.83x).
  constexpr bool kTwoPasses = std::is_same_v<T, BF16> && M >= 7;
  constexpr int kNv = M == 1       ? 12
                      : M <= 2     ? 6
                      : M == 3     ? 4
                      : M == 4     ? 3
                      : kTwoPasses ? 3
                      : M <= 6     ? 2
                                   : 1;
  constexpr int64_t kWidth = kPartialFloats / M / (8 * kNv) * (8 * kNv);
  const bool from_l3 = M == 1 && p.k * (r.n1 - r.n0) * int64_t{sizeof(T)} > kOneRowL2Bytes;
  const bool long_groups = p.k * p.n * int64_t{sizeof(T)} < kOneRowLongGroupBytes;
  const bool half_groups = kPrefetch && M >= 4 && CrowdsL1Sets(p.ldb * int64_t{sizeof(T)});
  const int64_t group = half_groups   ? kGroup / 2
                        : kPrefetch   ? kGroup
                        : !from_l3    ? kAvx2.kc
                        : long_groups ? kOneRowLongGroup<T>
                                      : kOneRowGroup<T>;
  for (int64_t j = r.n0; j < r.n1; j += kWidth) {
    Panel<T, M, kNv, kTransA, kPrefetch>(p, j, Min(kWidth, r.n1 - j), group, buf);
  }
}

template <int M>
void Rows(const Problem& p, const Region& r, const Buffers& buf) {
  const int64_t bytes = p.k * p.n * (p.bf16_in ? 2 : 4);
  const bool streaming =
      p.b_from_dram || bytes > (M == 1 ? kOneRowStreamingBytes : kStreamingBytes);
  const int variant = (p.bf16_in ? 4 : 0) + (p.trans_a ? 2 : 0) + (streaming ? 1 : 0);
  switch (variant) {
    case 0: return Rows<float, M, false, false>(p, r, buf);
    case 1: return Rows<float, M, false, true>(p, r, buf);
    case 2: return Rows<float, M, true, false>(p, r, buf);
    case 3: return Rows<float, M, true, true>(p, r, buf);
    case 4: return Rows<BF16, M, false, false>(p, r, buf);
    case 5: return Rows<BF16, M, false, true>(p, r, buf);
    case 6: return Rows<BF16, M, true, false>(p, r, buf);
    default: return Rows<BF16, M, true, true>(p, r, buf);
  }
}

// More rows than one pass holds (StreamsB: B in the L2) go in chunks of 6,
// the most the 16 ymm registers hold two vectors wide.
constexpr int64_t kChunkRows = 6;

}  // namespace

void DecodeRegion(const Problem& p, const Region& r, std::byte* scratch) {
  if (p.m > kDecodeChunkRows) {
    // Chunks of rows, each streaming the region's B again (from cache): a
    // row's sums are the same whichever chunk holds it.
    for (int64_t i0 = 0; i0 < p.m; i0 += kChunkRows) {
      DecodeRegion(RowSlice(p, i0, Min(kChunkRows, p.m - i0)), r, scratch);
    }
    return;
  }
  float* acc = reinterpret_cast<float*>(scratch);
  const Buffers buf{acc, acc + kPartialFloats, acc + 2 * kPartialFloats};
  switch (p.m) {
    case 1: return Rows<1>(p, r, buf);
    case 2: return Rows<2>(p, r, buf);
    case 3: return Rows<3>(p, r, buf);
    case 4: return Rows<4>(p, r, buf);
    case 5: return Rows<5>(p, r, buf);
    case 6: return Rows<6>(p, r, buf);
    case 7: return Rows<7>(p, r, buf);
    case 8: return Rows<8>(p, r, buf);
    default: __builtin_trap();  // the dispatcher sends only M <= decode_max_m
  }
}

}  // namespace anvil::kernels::gemm_internal::avx2
