// AVX2 GEMM: the packed driver (gemm_driver.h) around a 6x16 FMA tile, and a
// streaming path for small M with B = [k, n]. bf16 inputs are widened to f32
// (exactly) while packing or loading, so both dtypes run the same f32 FMA
// chains: per K block of 256 from zero, in increasing k; block sums in order.
// GCC 12 warns inside its own AVX-512 intrinsics (PR 105593); not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "anvil/kernels/cpu/gemm_driver.h"
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal {
namespace avx2 {
namespace {

constexpr int64_t kMr = kAvx2.mr;
constexpr int64_t kNr = kAvx2.nr;
constexpr int64_t kKc = kAvx2.kc;
static_assert(kMr == 6 && kNr == 16);
// A block 120 x 256 x 4 B = 120 KiB in L2; B block 256 x 512 x 4 B = 512 KiB.
constexpr int64_t kMc = 20 * kMr;
constexpr int64_t kNc = 512;

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
float Widen(float x) { return x; }
float Widen(BF16 x) {
  const uint32_t u = uint32_t{x.bits} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even, NaN -> 0x7FFF (convert.h's F32ToBF16, restated so no
// inline function is shared with other units).
uint16_t Round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

template <typename T>
void PackAT(const T* a, int64_t lda, bool trans, int64_t rows, int64_t kc, uint32_t* words) {
  float* ap = reinterpret_cast<float*>(words);
  for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
    const int64_t nrow = Min(kMr, rows - r0);
    float* panel = ap + r0 * kc;
    for (int64_t r = 0; r < kMr; ++r) {
      for (int64_t k = 0; k < kc; ++k) {
        panel[k * kMr + r] =
            r >= nrow ? 0.0f : Widen(trans ? a[k * lda + r0 + r] : a[(r0 + r) * lda + k]);
      }
    }
  }
}

template <typename T>
void PackBT(const T* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, uint32_t* words) {
  float* bp = reinterpret_cast<float*>(words);
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    const int64_t ncol = Min(kNr, cols - c0);
    float* panel = bp + c0 * kc;
    if (trans) {
      for (int64_t j = 0; j < kNr; ++j)
        for (int64_t k = 0; k < kc; ++k)
          panel[k * kNr + j] = j < ncol ? Widen(b[(c0 + j) * ldb + k]) : 0.0f;
    } else {
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < kNr; ++j)
          panel[k * kNr + j] = j < ncol ? Widen(b[k * ldb + c0 + j]) : 0.0f;
    }
  }
}

// C[0:6, 0:16] (=|+=) the K block's sum from zero.
void MicroKernel(int64_t steps, const float* ap, const float* bp, float* c, int64_t ldc, bool add) {
  __m256 acc[kMr][2];
  for (int r = 0; r < kMr; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t s = 0; s < steps; ++s) {
    // The B micro-panel 16 steps ahead (1 KiB), as the AVX-512 kernel does:
    // a panel packed once for many calls (PackedB) comes from L3 or DRAM.
    _mm_prefetch(reinterpret_cast<const char*>(bp + 16 * kNr), _MM_HINT_T0);
    const __m256 b0 = _mm256_load_ps(bp), b1 = _mm256_load_ps(bp + 8);
#pragma GCC unroll 6
    for (int r = 0; r < kMr; ++r) {
      const __m256 av = _mm256_broadcast_ss(ap + r);
      acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
    }
    ap += kMr;
    bp += kNr;
  }
  for (int r = 0; r < kMr; ++r) {
    float* row = c + r * ldc;
    if (add) {
      acc[r][0] = _mm256_add_ps(_mm256_loadu_ps(row), acc[r][0]);
      acc[r][1] = _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[r][1]);
    }
    _mm256_storeu_ps(row, acc[r][0]);
    _mm256_storeu_ps(row + 8, acc[r][1]);
  }
}

struct Tier {
  static constexpr bool kFp8Pairs = false;  // GemmFp8 packs f32 words for the f32 kernel
  static constexpr int64_t kMr = avx2::kMr;
  static constexpr int64_t kNr = avx2::kNr;
  static constexpr int64_t kMc = avx2::kMc;
  static constexpr int64_t kNc = avx2::kNc;
  static constexpr int64_t KBlock(bool) { return kKc; }
  static constexpr int64_t Steps(bool, int64_t kc) { return kc; }
  template <typename T>
  static void PackA(const T* a, int64_t lda, bool t, int64_t rows, int64_t kc, uint32_t* ap) {
    PackAT(a, lda, t, rows, kc, ap);
  }
  template <typename T>
  static void PackB(const T* b, int64_t ldb, bool t, int64_t cols, int64_t kc, uint32_t* bp) {
    PackBT(b, ldb, t, cols, kc, bp);
  }
  static void Micro(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp, float* c,
                    int64_t ldc, bool add) {
    MicroKernel(steps, reinterpret_cast<const float*>(ap), reinterpret_cast<const float*>(bp), c,
                ldc, add);
  }
  static void WidenRow(const BF16* src, float* dst, int64_t n) {
    for (int64_t j = 0; j < n; ++j) dst[j] = Widen(src[j]);
  }
  static void RoundRow(const float* src, BF16* dst, int64_t n) {
    for (int64_t j = 0; j < n; ++j) dst[j].bits = Round(src[j]);
  }
};

// ---- streaming path ----------------------------------------------------------

__m256 LoadB(const float* p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lanes));
}
__m256 LoadB(const BF16* p, int64_t n) {
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  } else {
    alignas(16) uint16_t tmp[8] = {};
    for (int64_t j = 0; j < n; ++j) tmp[j] = p[j].bits;
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// M rows x NV*8 columns from column j0 (ncols valid); the same FMA chains and
// block sums as MicroKernel, so the same bits as the packed path.
template <typename T, int M, int NV>
void Strip(const Problem& p, int64_t j0, int64_t ncols) {
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b) + j0;
  const int64_t si = p.trans_a ? 1 : p.lda, sk = p.trans_a ? p.lda : 1;
  alignas(32) float run[M][NV * 8];
  for (int64_t pc = 0; pc < p.k; pc += kKc) {
    const int64_t kend = Min(pc + kKc, p.k);
    __m256 acc[M][NV];
    for (int i = 0; i < M; ++i)
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
    for (int64_t k = pc; k < kend; ++k) {
      __m256 bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = LoadB(b + k * p.ldb + 8 * v, ncols - 8 * v);
      for (int i = 0; i < M; ++i) {
        const __m256 av = _mm256_set1_ps(Widen(a[i * si + k * sk]));
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
      }
    }
    for (int i = 0; i < M; ++i) {
      for (int v = 0; v < NV; ++v) {
        float* dst = &run[i][8 * v];
        if (pc > 0) {
          _mm256_store_ps(dst, _mm256_add_ps(_mm256_load_ps(dst), acc[i][v]));
        } else if (p.accumulate) {
          alignas(32) float old[8] = {};
          for (int64_t j = 0; j < 8 && 8 * v + j < ncols; ++j) {
            const int64_t at = i * p.ldc + j0 + 8 * v + j;
            old[j] = p.bf16_out ? Widen(static_cast<const BF16*>(p.c)[at])
                                : static_cast<const float*>(p.c)[at];
          }
          _mm256_store_ps(dst, _mm256_add_ps(_mm256_load_ps(old), acc[i][v]));
        } else {
          _mm256_store_ps(dst, acc[i][v]);
        }
      }
    }
  }
  for (int i = 0; i < M; ++i) {
    for (int64_t j = 0; j < ncols; ++j) {
      const int64_t at = i * p.ldc + j0 + j;
      if (p.bf16_out) {
        static_cast<BF16*>(p.c)[at].bits = Round(run[i][j]);
      } else {
        static_cast<float*>(p.c)[at] = run[i][j];
      }
    }
  }
}

template <int M>
void Rows(const Problem& p, const Region& r) {
  constexpr int kNv = M <= 2 ? 6 : M == 3 ? 4 : M == 4 ? 3 : M <= 6 ? 2 : 1;
  for (int64_t j = r.n0; j < r.n1; j += 8 * kNv) {
    const int64_t n = Min(8 * kNv, r.n1 - j);
    if (p.bf16_in) {
      Strip<BF16, M, kNv>(p, j, n);
    } else {
      Strip<float, M, kNv>(p, j, n);
    }
  }
}

// More rows than one pass holds (StreamsB: B in the L2) go in chunks of 6,
// the most the 16 ymm registers hold two vectors wide.
constexpr int64_t kChunkRows = 6;

void DecodeRegion(const Problem& p, const Region& r) {
  if (p.m > kDecodeChunkRows) {
    for (int64_t i0 = 0; i0 < p.m; i0 += kChunkRows) {
      DecodeRegion(RowSlice(p, i0, Min(kChunkRows, p.m - i0)), r);
    }
    return;
  }
  switch (p.m) {
    case 1: return Rows<1>(p, r);
    case 2: return Rows<2>(p, r);
    case 3: return Rows<3>(p, r);
    case 4: return Rows<4>(p, r);
    case 5: return Rows<5>(p, r);
    case 6: return Rows<6>(p, r);
    case 7: return Rows<7>(p, r);
    case 8: return Rows<8>(p, r);
    default: __builtin_trap();  // the dispatcher sends only M <= decode_max_m
  }
}

}  // namespace
}  // namespace avx2

void PackWholeBAvx2(const Problem& p, int64_t n0, int64_t n1, uint32_t* out) {
  Driver<avx2::Tier>::PackWhole<float>(p, n0, n1, out);
}

void GemmRegionAvx2(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes) {
  if (p.fp8 != nullptr) {
    if (p.fp8->decode_bf16) {
      Driver<avx2::Tier>::Run<Fp8Codes<true>>(p, r, scratch, scratch_bytes);
    } else {
      Driver<avx2::Tier>::Run<Fp8Codes<false>>(p, r, scratch, scratch_bytes);
    }
  } else if (StreamsB(p, kAvx2)) {
    avx2::DecodeRegion(p, r);
  } else if (p.bf16_in) {
    Driver<avx2::Tier>::Run<BF16>(p, r, scratch, scratch_bytes);
  } else {
    Driver<avx2::Tier>::Run<float>(p, r, scratch, scratch_bytes);
  }
}

}  // namespace anvil::kernels::gemm_internal
