// AVX2 GEMM: the packed driver (gemm_driver.h) around a 6x16 FMA tile, the
// packing in gemm_avx2_pack.cc and, for small M with B = [k, n], the streaming
// path of gemm_avx2_decode.cc. bf16 inputs are widened to f32 (exactly) while
// packing or loading, so both dtypes run the same f32 FMA chains: per K block
// of 256 from zero, in increasing k; block sums in order.
#include "anvil/kernels/cpu/gemm_avx2.h"

#include <cstring>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_driver.h"
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal {
namespace avx2 {
namespace {

constexpr int64_t kKc = kAvx2.kc;
// A block 120 x 256 x 4 B = 120 KiB in L2; B block 256 x 512 x 4 B = 512 KiB.
constexpr int64_t kMc = 20 * kMr;
constexpr int64_t kNc = 512;

// C[0:kRows, 0:16] (=|+=) the K block's sum from zero; kRows < 6: the first
// rows of a panel (an edge tile; each row's sums are the same whichever
// kernel computes them). The twelve accumulators are named one by one (the
// rows past kRows are dead code): with them in an array indexed by an
// unrolled loop, GCC 12 kept the registers but also stored all twelve to the
// stack at every k step (ten stores per twelve FMAs; the kernel ran at about
// half its peak). B's step s is the kNr floats at bp + s * b_step (a packed
// panel: kNr); b_next, a panel laid out as bp's to bring into L2 step by
// step, or null. With sa [kRows] and sb [kNr], GemmFp8's block-scaled update
// instead (gemm_driver.h's BlockUpdate, in registers): C = P * (sa * sb), or
// fma(P, sa * sb, C) with `add`.
template <int kRows = kMr>
void MicroKernel(int64_t steps, const float* ap, const float* bp, int64_t b_step,
                 const float* b_next, float* c, int64_t ldc, bool add, const float* sa = nullptr,
                 const float* sb = nullptr) {
  static_assert(kRows >= 1 && kRows <= kMr);
  // The C tile is read (add) or written at the end; fetch its lines now, so the
  // K block's FMAs hide the miss (C of a training GEMM is far larger than L2).
  for (int r = 0; r < kRows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1), _MM_HINT_T0);
  }
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const int64_t next = b_next != nullptr ? b_next - bp : 0;
  // The B micro-panel 16 steps ahead (1 KiB), as the AVX-512 kernel does: a
  // panel packed once for many calls (PackedB) comes from L3 or DRAM. A B
  // read in place (b_step: its row stride), 8 rows ahead: its rows share a
  // few L1 sets (gemm_driver.h), and 16 ahead could evict each other before
  // use (on a Zen 5, 2 threads, in a slow spell: 64x768x768 159 -> 179
  // GFLOP/s, 48x768x768 165 -> 192; on the host quiet, +1-3%; 4 ahead
  // measured as 8, 32 worse than 16).
  const int64_t ahead = (b_step == kNr ? 16 : 8) * b_step;
#pragma GCC unroll 4
  for (int64_t s = 0; s < steps; ++s) {
    _mm_prefetch(reinterpret_cast<const char*>(bp + ahead), _MM_HINT_T0);
    if (next != 0) _mm_prefetch(reinterpret_cast<const char*>(bp + next), _MM_HINT_T1);
    const __m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
    __m256 a = _mm256_broadcast_ss(ap + 0);
    c00 = _mm256_fmadd_ps(a, b0, c00);
    c01 = _mm256_fmadd_ps(a, b1, c01);
    if constexpr (kRows > 1) {
      a = _mm256_broadcast_ss(ap + 1);
      c10 = _mm256_fmadd_ps(a, b0, c10);
      c11 = _mm256_fmadd_ps(a, b1, c11);
    }
    if constexpr (kRows > 2) {
      a = _mm256_broadcast_ss(ap + 2);
      c20 = _mm256_fmadd_ps(a, b0, c20);
      c21 = _mm256_fmadd_ps(a, b1, c21);
    }
    if constexpr (kRows > 3) {
      a = _mm256_broadcast_ss(ap + 3);
      c30 = _mm256_fmadd_ps(a, b0, c30);
      c31 = _mm256_fmadd_ps(a, b1, c31);
    }
    if constexpr (kRows > 4) {
      a = _mm256_broadcast_ss(ap + 4);
      c40 = _mm256_fmadd_ps(a, b0, c40);
      c41 = _mm256_fmadd_ps(a, b1, c41);
    }
    if constexpr (kRows > 5) {
      a = _mm256_broadcast_ss(ap + 5);
      c50 = _mm256_fmadd_ps(a, b0, c50);
      c51 = _mm256_fmadd_ps(a, b1, c51);
    }
    ap += kMr;
    bp += b_step;
  }
  const __m256 acc[kMr][2] = {{c00, c01}, {c10, c11}, {c20, c21},
                              {c30, c31}, {c40, c41}, {c50, c51}};
  if (sa != nullptr) {
    const __m256 sb0 = _mm256_loadu_ps(sb), sb1 = _mm256_loadu_ps(sb + 8);
    for (int r = 0; r < kRows; ++r) {
      float* row = c + r * ldc;
      const __m256 sr = _mm256_set1_ps(sa[r]);
      const __m256 f0 = _mm256_mul_ps(sr, sb0), f1 = _mm256_mul_ps(sr, sb1);
      __m256 lo, hi;
      if (add) {
        lo = _mm256_fmadd_ps(acc[r][0], f0, _mm256_loadu_ps(row));
        hi = _mm256_fmadd_ps(acc[r][1], f1, _mm256_loadu_ps(row + 8));
      } else {
        lo = _mm256_mul_ps(acc[r][0], f0);
        hi = _mm256_mul_ps(acc[r][1], f1);
      }
      _mm256_storeu_ps(row, lo);
      _mm256_storeu_ps(row + 8, hi);
    }
    return;
  }
  for (int r = 0; r < kRows; ++r) {
    float* row = c + r * ldc;
    __m256 lo = acc[r][0], hi = acc[r][1];
    if (add) {
      lo = _mm256_add_ps(_mm256_loadu_ps(row), lo);
      hi = _mm256_add_ps(_mm256_loadu_ps(row + 8), hi);
    }
    _mm256_storeu_ps(row, lo);
    _mm256_storeu_ps(row + 8, hi);
  }
}

struct Tier {
  static constexpr bool kFp8Pairs = false;  // GemmFp8 packs f32 words for the f32 kernel
  static constexpr int64_t kMr = avx2::kMr;
  static constexpr int64_t kNr = avx2::kNr;
  static constexpr int64_t kMc = avx2::kMc;
  static constexpr int64_t kNc = avx2::kNc;
  // Few rows read B in place while its rows are at most a page apart: a
  // 16-column panel takes 64 bytes a row, and the hardware prefetchers stop
  // at page boundaries (ANVIL_ISA=avx2 on the Xeon host, two runs each:
  // 64x3072x768 f32 135-148 -> 111-115 GFLOP/s in place, 32x768x768
  // 157-163 -> 170-172).
  static constexpr int64_t kInPlaceMaxLdb = 1024;
  // ... unless the rows are a multiple of 2 KiB apart (B 512 or 1024 wide):
  // then a panel's rows fall in one or two sets of a 4 KiB-way L1, and the
  // rows the kernel prefetches ahead evict each other. Packed instead
  // (ANVIL_ISA=avx2 on a Zen 5, 2 threads, old and new in turn, GFLOP/s):
  // 64x1024x1024 96 -> 159, 32x1024x1024 92 -> 119, 24x1024x1024 101 ->
  // 114, 64x512x512 153 -> 175, 32x512x512 158 -> 152.
  static constexpr int64_t kInPlaceAliasLdb = 512;
  static constexpr int64_t KBlock(bool) { return kKc; }
  static constexpr int64_t Steps(bool, int64_t kc) { return kc; }
  template <typename T>
  static void PackA(const T* a, int64_t lda, bool t, int64_t rows, int64_t kc, uint32_t* ap) {
    avx2::PackA(a, lda, t, rows, kc, reinterpret_cast<float*>(ap));
  }
  template <typename T>
  static void PackB(const T* b, int64_t ldb, bool t, int64_t cols, int64_t kc, uint32_t* bp) {
    avx2::PackB(b, ldb, t, cols, kc, reinterpret_cast<float*>(bp));
  }
  static void Micro(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp, int64_t b_step,
                    const uint32_t* b_next, float* c, int64_t ldc, bool add) {
    MicroKernel(steps, reinterpret_cast<const float*>(ap), reinterpret_cast<const float*>(bp),
                b_step, reinterpret_cast<const float*>(b_next), c, ldc, add);
  }
  // A whole tile's block-scaled update (gemm_driver.h's BlockUpdate) in registers.
  static bool MicroScaled(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp,
                          int64_t b_step, const uint32_t* b_next, float* c, int64_t ldc,
                          const float* sa, const float* sb, bool add) {
    MicroKernel(steps, reinterpret_cast<const float*>(ap), reinterpret_cast<const float*>(bp),
                b_step, reinterpret_cast<const float*>(b_next), c, ldc, add, sa, sb);
    return true;
  }
  // FP8 operands pack with gemm_fp8.h's scalar code.
  static bool PackFp8Vector(const Fp8Operand&, const float*, const uint16_t*, int64_t, bool,
                            int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, uint32_t*) {
    return false;
  }
  // The first `rows` (< kMr) rows of a tile straight into C.
  static bool MicroRows(bool, int64_t rows, int64_t steps, const uint32_t* ap_words,
                        const uint32_t* bp_words, int64_t b_step, const uint32_t* b_next_words,
                        float* c, int64_t ldc, bool add) {
    const auto* ap = reinterpret_cast<const float*>(ap_words);
    const auto* bp = reinterpret_cast<const float*>(bp_words);
    const auto* b_next = reinterpret_cast<const float*>(b_next_words);
    switch (rows) {
      case 1:
        MicroKernel<1>(steps, ap, bp, b_step, b_next, c, ldc, add);
        return true;
      case 2:
        MicroKernel<2>(steps, ap, bp, b_step, b_next, c, ldc, add);
        return true;
      case 3:
        MicroKernel<3>(steps, ap, bp, b_step, b_next, c, ldc, add);
        return true;
      case 4:
        MicroKernel<4>(steps, ap, bp, b_step, b_next, c, ldc, add);
        return true;
      case 5:
        MicroKernel<5>(steps, ap, bp, b_step, b_next, c, ldc, add);
        return true;
      default: return false;
    }
  }
  static void WidenRow(const BF16* src, float* dst, int64_t n) { avx2::WidenRow(src, dst, n); }
  static void RoundRow(const float* src, BF16* dst, int64_t n) { avx2::RoundRow(src, dst, n); }
};

}  // namespace
}  // namespace avx2

void PackWholeBAvx2(const Problem& p, int64_t n0, int64_t n1, uint32_t* out) {
  Driver<avx2::Tier>::PackWholeB(p, n0, n1, out);
}

void GemmRegionAvx2(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes) {
  if (p.fp8 != nullptr) {
    if (StreamsB(p, kAvx2)) {
      avx2::DecodeFp8Region(p, r, scratch);
    } else if (p.fp8->decode_bf16) {
      Driver<avx2::Tier>::Run<Fp8Codes<true>>(p, r, scratch, scratch_bytes);
    } else {
      Driver<avx2::Tier>::Run<Fp8Codes<false>>(p, r, scratch, scratch_bytes);
    }
  } else if (StreamsB(p, kAvx2)) {
    avx2::DecodeRegion(p, r, scratch);
  } else if (p.bf16_in) {
    Driver<avx2::Tier>::Run<BF16>(p, r, scratch, scratch_bytes);
  } else {
    Driver<avx2::Tier>::Run<float>(p, r, scratch, scratch_bytes);
  }
}

}  // namespace anvil::kernels::gemm_internal
