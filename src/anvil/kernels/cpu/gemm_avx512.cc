// AVX-512 GEMM, packed path: Goto/BLIS blocking (B block kc x nc packed once
// per K block, A block mc x kc per row block) around a 14x32 register tile.
// Each kc block's product sum starts from zero and is then added to C's
// partial (or stored, for the first block): the order gemm.h promises.
// (GemmFp8 with block scaling packs over all of K instead: gemm_driver.h.)
#include "anvil/kernels/cpu/gemm_avx512.h"

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_driver.h"

namespace anvil::kernels::gemm_internal {
namespace avx512 {
namespace {

// Row and column blocks. The A block (kMc x 1024 steps x 4 B = 672 KiB)
// stays in the 1 MiB L2 while every B micro-panel of the nc-wide block
// streams past it; the packed B block (1024 x kNc x 4 B = 4 MiB) lives in L3
// and is reused by every row block of the thread. kNc 512..4096 measured
// within 2% of each other.
constexpr int64_t kMc = 12 * kMr;
constexpr int64_t kNc = 1024;

// How a tile's sum P goes into C. The scaled forms are GemmFp8's block
// scaling (gemm_driver.h's BlockUpdate, in registers): C = P * (sa * sb) or
// fma(P, sa * sb, C), sa the rows' factors, sb the columns'.
enum class Update { kStore, kAdd, kScaledStore, kScaledAdd };

// C[0:kRows, 0:kNr] (=|+=) Σ_s a(s, r) b(s, j) over `steps` k steps, with the
// sum started from zero in registers. `kBf16`: a step is a k-pair (vdpbf16ps).
// B's step s is the kNr words at bp + s * b_step (a packed panel: kNr).
// b_next: a panel laid out as bp's, to bring into L2 step by step, or null.
// kRows < kMr: the first rows of a panel (an edge tile; each row's sums are
// the same whichever kernel computes them). sa [kRows], sb [kNr]: the scaled
// updates' factors.
template <bool kBf16, int kRows = kMr>
void MicroKernel(int64_t steps, const uint32_t* ap, const uint32_t* bp, int64_t b_step,
                 const uint32_t* b_next, float* c, int64_t ldc, Update update,
                 const float* sa = nullptr, const float* sb = nullptr) {
  __m512 acc[kRows][2];
#pragma GCC unroll 14
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  // C's rows are read (or written) only after the K loop: fetch both lines
  // of each row now, so a C that lives in L3 or DRAM costs no stall.
  for (int r = 0; r < kRows; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + kNr - 1), _MM_HINT_T0);
  }
  const int64_t next = b_next != nullptr ? b_next - bp : 0;
  for (int64_t s = 0; s < steps; ++s) {
    // The B micro-panel 16 steps ahead (2 KiB): a panel packed once for many
    // calls (PackedB) comes from L3 or DRAM, not from the L2 a fresh pack
    // left it in. Decoding the small model at batch 32: +17%; the training
    // shapes f32 +3%, bf16 level.
    _mm_prefetch(reinterpret_cast<const char*>(bp + 16 * b_step), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(bp + 16 * b_step + 16), _MM_HINT_T0);
    if (next != 0) {
      _mm_prefetch(reinterpret_cast<const char*>(bp + next), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(bp + next + 16), _MM_HINT_T1);
    }
    const __m512 b0 = _mm512_loadu_ps(bp);
    const __m512 b1 = _mm512_loadu_ps(bp + 16);
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      if constexpr (kBf16) {
        const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
        acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, (__m512bh)b0);
        acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, (__m512bh)b1);
      } else {
        const __m512 a = _mm512_set1_ps(reinterpret_cast<const float*>(ap)[r]);
        acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
      }
    }
    ap += kMr;
    bp += b_step;
  }
  if (update == Update::kScaledStore || update == Update::kScaledAdd) {
    const __m512 sb0 = _mm512_loadu_ps(sb), sb1 = _mm512_loadu_ps(sb + 16);
#pragma GCC unroll 14
    for (int r = 0; r < kRows; ++r) {
      float* row = c + r * ldc;
      const __m512 sr = _mm512_set1_ps(sa[r]);
      const __m512 f0 = _mm512_mul_ps(sr, sb0), f1 = _mm512_mul_ps(sr, sb1);
      if (update == Update::kScaledAdd) {
        acc[r][0] = _mm512_fmadd_ps(acc[r][0], f0, _mm512_loadu_ps(row));
        acc[r][1] = _mm512_fmadd_ps(acc[r][1], f1, _mm512_loadu_ps(row + 16));
      } else {
        acc[r][0] = _mm512_mul_ps(acc[r][0], f0);
        acc[r][1] = _mm512_mul_ps(acc[r][1], f1);
      }
      _mm512_storeu_ps(row, acc[r][0]);
      _mm512_storeu_ps(row + 16, acc[r][1]);
    }
    return;
  }
#pragma GCC unroll 14
  for (int r = 0; r < kRows; ++r) {
    float* row = c + r * ldc;
    if (update == Update::kAdd) {
      acc[r][0] = _mm512_add_ps(_mm512_loadu_ps(row), acc[r][0]);
      acc[r][1] = _mm512_add_ps(_mm512_loadu_ps(row + 16), acc[r][1]);
    }
    _mm512_storeu_ps(row, acc[r][0]);
    _mm512_storeu_ps(row + 16, acc[r][1]);
  }
}

// The AVX-512 tier for Driver (gemm_driver.h).
struct Tier {
  static constexpr bool kFp8Pairs = true;  // GemmFp8 packs bf16 k-pairs for the vdpbf16ps kernel
  static constexpr int64_t kMr = avx512::kMr;
  static constexpr int64_t kNr = avx512::kNr;
  static constexpr int64_t kMc = avx512::kMc;
  static constexpr int64_t kNc = avx512::kNc;
  // Few rows read B in place at any row stride (Xeon host, 2 threads, two
  // runs each, f32 GFLOP/s: 32x768x768 176-184 -> 255, 64x768x768 235-253 ->
  // 297-305, 64x768x3072 214-222 -> 261, 32x16384x512 150-152 -> 181-183;
  // 64x3072x768 level).
  static constexpr int64_t kInPlaceMaxLdb = int64_t{1} << 40;
  // Strides of 2 or 4 KiB as well (its panel rows are two lines): on a Zen 5,
  // 64x512x512 lost 10% packed, 64x1024x1024 gained 6%, 32 rows level.
  static constexpr int64_t kInPlaceAliasLdb = 0;
  static constexpr int64_t KBlock(bool bf16) { return bf16 ? kKcBf16 : kKcF32; }
  static constexpr int64_t Steps(bool bf16, int64_t kc) { return bf16 ? (kc + 1) / 2 : kc; }

  static void PackA(const float* a, int64_t lda, bool t, int64_t rows, int64_t kc, uint32_t* ap) {
    PackAF32(a, lda, t, rows, kc, reinterpret_cast<float*>(ap));
  }
  static void PackA(const BF16* a, int64_t lda, bool t, int64_t rows, int64_t kc, uint32_t* ap) {
    PackABf16(a, lda, t, rows, kc, ap);
  }
  static void PackB(const float* b, int64_t ldb, bool t, int64_t cols, int64_t kc, uint32_t* bp) {
    PackBF32(b, ldb, t, cols, kc, reinterpret_cast<float*>(bp));
  }
  static void PackB(const BF16* b, int64_t ldb, bool t, int64_t cols, int64_t kc, uint32_t* bp) {
    PackBBf16(b, ldb, t, cols, kc, bp);
  }
  static void Micro(bool bf16, int64_t steps, const uint32_t* ap, const uint32_t* bp,
                    int64_t b_step, const uint32_t* b_next, float* c, int64_t ldc, bool add) {
    const Update u = add ? Update::kAdd : Update::kStore;
    if (bf16) {
      MicroKernel<true>(steps, ap, bp, b_step, b_next, c, ldc, u);
    } else {
      MicroKernel<false>(steps, ap, bp, b_step, b_next, c, ldc, u);
    }
  }
  // A whole tile's block-scaled update (gemm_driver.h's BlockUpdate) in
  // the kernel's registers; false where the tier has none.
  static bool MicroScaled(bool bf16, int64_t steps, const uint32_t* ap, const uint32_t* bp,
                          int64_t b_step, const uint32_t* b_next, float* c, int64_t ldc,
                          const float* sa, const float* sb, bool add) {
    const Update u = add ? Update::kScaledAdd : Update::kScaledStore;
    if (bf16) {
      MicroKernel<true>(steps, ap, bp, b_step, b_next, c, ldc, u, sa, sb);
    } else {
      MicroKernel<false>(steps, ap, bp, b_step, b_next, c, ldc, u, sa, sb);
    }
    return true;
  }
  static bool PackFp8Vector(const Fp8Operand& o, const float* values, const uint16_t* bf16,
                            int64_t ld, bool trans, int64_t r0, int64_t rows, int64_t p0,
                            int64_t kc, int64_t k_total, int k_panel, bool pairs, uint32_t* out) {
    return avx512::PackFp8Vector(o, values, bf16, ld, trans, r0, rows, p0, kc, k_total, k_panel,
                                 pairs, out);
  }
  // The first `rows` (< kMr) rows of a tile straight into C.
  static bool MicroRows(bool bf16, int64_t rows, int64_t steps, const uint32_t* ap,
                        const uint32_t* bp, int64_t b_step, const uint32_t* b_next, float* c,
                        int64_t ldc, bool add) {
    const Update u = add ? Update::kAdd : Update::kStore;
    if (bf16) return Rows<true>(rows, steps, ap, bp, b_step, b_next, c, ldc, u);
    return Rows<false>(rows, steps, ap, bp, b_step, b_next, c, ldc, u);
  }
  template <bool kBf16>
  static bool Rows(int64_t rows, int64_t steps, const uint32_t* ap, const uint32_t* bp,
                   int64_t b_step, const uint32_t* b_next, float* c, int64_t ldc, Update u) {
    switch (rows) {
      case 1:
        MicroKernel<kBf16, 1>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 2:
        MicroKernel<kBf16, 2>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 3:
        MicroKernel<kBf16, 3>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 4:
        MicroKernel<kBf16, 4>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 5:
        MicroKernel<kBf16, 5>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 6:
        MicroKernel<kBf16, 6>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 7:
        MicroKernel<kBf16, 7>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 8:
        MicroKernel<kBf16, 8>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 9:
        MicroKernel<kBf16, 9>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 10:
        MicroKernel<kBf16, 10>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 11:
        MicroKernel<kBf16, 11>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 12:
        MicroKernel<kBf16, 12>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      case 13:
        MicroKernel<kBf16, 13>(steps, ap, bp, b_step, b_next, c, ldc, u);
        return true;
      default: return false;
    }
  }
  static void WidenRow(const BF16* src, float* dst, int64_t n) { avx512::WidenRow(src, dst, n); }
  static void RoundRow(const float* src, BF16* dst, int64_t n) { avx512::RoundRow(src, dst, n); }
};

}  // namespace
}  // namespace avx512

void PackWholeBAvx512(const Problem& p, int64_t n0, int64_t n1, uint32_t* out) {
  Driver<avx512::Tier>::PackWholeB(p, n0, n1, out);
}

void GemmRegionAvx512(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes) {
  if (p.fp8 != nullptr) {
    if (StreamsB(p, kAvx512F32)) {
      avx512::DecodeFp8Region(p, r, scratch);
    } else if (p.fp8->decode_bf16) {
      Driver<avx512::Tier>::Run<Fp8Codes<true>>(p, r, scratch, scratch_bytes);
    } else {
      Driver<avx512::Tier>::Run<Fp8Codes<false>>(p, r, scratch, scratch_bytes);
    }
  } else if (StreamsB(p, p.bf16_in ? kAvx512Bf16 : kAvx512F32)) {
    avx512::DecodeRegion(p, r, scratch);
  } else if (p.bf16_in) {
    Driver<avx512::Tier>::Run<BF16>(p, r, scratch, scratch_bytes);
  } else {
    Driver<avx512::Tier>::Run<float>(p, r, scratch, scratch_bytes);
  }
}

}  // namespace anvil::kernels::gemm_internal
