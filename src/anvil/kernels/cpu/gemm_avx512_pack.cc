// AVX-512 packing of A and B blocks into the micro-panel layouts of
// gemm_avx512.h. Masked loads bound every read to the matrix, masked stores
// every write to the panel; transposes are 16x16 in registers.
#include <algorithm>

#include "anvil/core/cpu_features.h"
#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_avx512.h"
#include "anvil/kernels/cpu/gemm_avx512_pack_internal.h"

namespace anvil::kernels::gemm_internal::avx512 {
namespace {

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
__mmask16 Mask16(int64_t n) { return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1u); }
__mmask32 Mask32(int64_t n) { return n >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << n) - 1u); }
constexpr __mmask16 kMrMask = (1u << kMr) - 1u;

// Loads up to 16 rows of 16 words (`words` valid per row) from rows of 32-bit
// data at `row_stride_bytes`, transposes, and stores the first `out_words`
// lanes of each of the first `steps` results at dst + s * dst_stride.
// For bf16 pairs the load mask counts 16-bit elements (`elems` <= 32) so an
// odd tail pair gets a zero high half.
[[gnu::always_inline]] inline void TransposeBlock(const std::byte* src, int64_t row_stride_bytes, int rows, __mmask32 elem_mask,
                    bool bf16, int steps, uint32_t* dst, int64_t dst_stride, __mmask16 out_mask) {
  __m512 v[16];
  for (int i = 0; i < 16; ++i) {
    if (i >= rows) {
      v[i] = _mm512_setzero_ps();
    } else if (bf16) {
      v[i] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(elem_mask, src + i * row_stride_bytes));
    } else {
      v[i] = _mm512_maskz_loadu_ps(static_cast<__mmask16>(elem_mask), src + i * row_stride_bytes);
    }
  }
  Transpose16x16(v);
  for (int s = 0; s < steps; ++s) {
    _mm512_mask_storeu_ps(dst + s * dst_stride, out_mask, v[s]);
  }
}

// Pairs (lo row, hi row) of `n` <= 16 bf16 each into 16 words; `hi` may be null (zero).
__m512i PairRows(const BF16* lo, const BF16* hi, int64_t n) {
  const __mmask16 m = Mask16(n);
  const __m512i l = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo));
  if (hi == nullptr) return l;
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi));
  return _mm512_or_si512(l, _mm512_slli_epi32(h, 16));
}

// One step chunk of one row, as 16 words: f32 values of codes k0..k0+15, or
// bf16 pairs of codes k0..k0+31 (pair s: k0 + 2s low, k0 + 2s + 1 high).
// `n`: valid codes from k0 (the rest count as past K: zero words or halves);
// `factor`: the MX factor of the chunk's scale block (1 without MX).
__m512i RowChunk(const uint8_t* codes, int64_t n, bool pairs, bool mx, float factor,
                 const float* values, const int32_t* bf16_words) {
  if (!pairs) {
    const __m512i idx = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(Mask16(n), codes));
    __m512 v = _mm512_i32gather_ps(idx, values, 4);
    if (mx) v = _mm512_maskz_mul_ps(Mask16(n), v, _mm512_set1_ps(factor));
    return _mm512_castps_si512(v);
  }
  // 32 codes as 16 little-endian words: the low byte is the even k.
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi8(Mask32(n), codes));
  const __m512i lo_idx = _mm512_and_si512(w, _mm512_set1_epi32(0xFF));
  const __m512i hi_idx = _mm512_srli_epi32(w, 8);
  const __mmask16 lo_valid = Mask16((n + 1) / 2), hi_valid = Mask16(n / 2);
  __m512i lo, hi;
  if (!mx) {
    lo = _mm512_i32gather_epi32(lo_idx, bf16_words, 4);
    hi = _mm512_i32gather_epi32(hi_idx, bf16_words, 4);
  } else {
    const __m512 f = _mm512_set1_ps(factor);
    lo = Bf16Bits(_mm512_mul_ps(_mm512_i32gather_ps(lo_idx, values, 4), f));
    hi = Bf16Bits(_mm512_mul_ps(_mm512_i32gather_ps(hi_idx, values, 4), f));
  }
  lo = _mm512_maskz_mov_epi32(lo_valid, lo);
  hi = _mm512_maskz_mov_epi32(hi_valid, hi);
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}

}  // namespace

bool PackFp8Vector(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                   bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int64_t k_total,
                   int k_panel, bool pairs, uint32_t* out) {
  if (pairs && GetCpuFeatures().avx512_vbmi) {
    return PackFp8PairsVbmi(o, bf16, ld, trans, r0, rows, p0, kc, k_total, k_panel, out);
  }
  return PackFp8Gathers(o, values, bf16, ld, trans, r0, rows, p0, kc, k_total, k_panel, pairs,
                        out);
}

bool PackFp8Gathers(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                    bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc,
                    int64_t k_total, int k_panel, bool pairs, uint32_t* out) {
  const bool mx = o.scaling == Fp8Scaling::kMx;
  const int64_t chunk = pairs ? 32 : 16;  // codes per 16 words
  if (mx && (trans || o.block % chunk != 0 || p0 % chunk != 0)) return false;
  const int64_t mx_blocks = mx ? (k_total + o.block - 1) / o.block : 0;
  const int64_t steps = pairs ? (kc + 1) / 2 : kc;
  // The bf16 table as 32-bit words for the gathers.
  alignas(64) int32_t bf16_words[256];
  if (pairs && !mx) {
    for (int q = 0; q < 256; ++q) bf16_words[q] = bf16[q];
  }
  const int64_t padded = (rows + k_panel - 1) / k_panel * k_panel;
  if (trans) {  // stored [k, rows]: a step's codes are contiguous, no transpose
    for (int64_t q0 = 0; q0 < padded; q0 += k_panel) {
      uint32_t* panel = out + q0 * steps;
      for (int g = 0; g < k_panel; g += 16) {
        const int group = std::min(16, k_panel - g);
        const int64_t valid = std::clamp<int64_t>(rows - q0 - g, 0, group);
        const __mmask16 load = Mask16(valid), store = Mask16(group);
        auto codes_at = [&](int64_t k) {
          return _mm512_cvtepu8_epi32(
              _mm_maskz_loadu_epi8(load, o.data + (p0 + k) * ld + r0 + q0 + g));
        };
        for (int64_t st = 0; st < steps; ++st) {
          __m512i w;
          if (!pairs) {
            w = _mm512_castps_si512(_mm512_i32gather_ps(codes_at(st), values, 4));
          } else {
            w = _mm512_i32gather_epi32(codes_at(2 * st), bf16_words, 4);
            if (2 * st + 1 < kc) {
              const __m512i hi = _mm512_i32gather_epi32(codes_at(2 * st + 1), bf16_words, 4);
              w = _mm512_or_si512(w, _mm512_slli_epi32(hi, 16));
            }
          }
          // Rows past the matrix are zero words (not value(0), whatever it is).
          _mm512_mask_storeu_epi32(panel + st * k_panel + g, store,
                                   _mm512_maskz_mov_epi32(load, w));
        }
      }
    }
    return true;
  }
  for (int64_t q0 = 0; q0 < padded; q0 += k_panel) {
    uint32_t* panel = out + q0 * steps;
    // Groups of 16 of the panel's rows, transposed 16 steps at a time.
    for (int g = 0; g < k_panel; g += 16) {
      const int group = std::min(16, k_panel - g);
      const __mmask16 store_mask = Mask16(group);
      for (int64_t c0 = 0; c0 < kc; c0 += chunk) {
        const int64_t n = std::min(chunk, kc - c0);
        __m512 v[16];
        for (int i = 0; i < 16; ++i) {
          const int64_t r = q0 + g + i;
          if (i >= group || r >= rows) {
            v[i] = _mm512_setzero_ps();
            continue;
          }
          const float factor =
              mx ? Pow2(o.e8m0[(r0 + r) * mx_blocks + (p0 + c0) / o.block]) : 1.0f;
          v[i] = _mm512_castsi512_ps(RowChunk(o.data + (r0 + r) * ld + p0 + c0, n, pairs, mx,
                                              factor, values, bf16_words));
        }
        Transpose16x16(v);
        const int64_t s0 = pairs ? c0 / 2 : c0;
        const int64_t ns = std::min<int64_t>(16, steps - s0);
        for (int64_t s = 0; s < ns; ++s) {
          _mm512_mask_storeu_ps(reinterpret_cast<float*>(panel + (s0 + s) * k_panel + g),
                                store_mask, v[s]);
        }
      }
    }
  }
  return true;
}

void WidenRow(const BF16* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    const __m256i h = _mm256_maskz_loadu_epi16(Mask16(n - j), src + j);
    _mm512_storeu_ps(dst + j, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
}

void RoundRow(const float* src, BF16* dst, int64_t n) {
  for (int64_t j = 0; j < n; j += 16) {
    _mm256_mask_storeu_epi16(dst + j, Mask16(n - j),
                             _mm512_cvtepi32_epi16(Bf16Bits(_mm512_loadu_ps(src + j))));
  }
}

void PackAF32(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap) {
  uint32_t* out = reinterpret_cast<uint32_t*>(ap);
  for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
    const int nrow = static_cast<int>(Min(kMr, rows - r0));
    uint32_t* panel = out + r0 * kc;  // (r0 / kMr) * kMr * kc
    if (!trans) {
      const auto* src = reinterpret_cast<const std::byte*>(a + r0 * lda);
      const bool prefetch_next = r0 + kMr < rows;
      for (int64_t k0 = 0; k0 < kc; k0 += 16) {
        const int nk = static_cast<int>(Min(16, kc - k0));
        // A usually comes from DRAM in short row segments the hardware
        // prefetcher learns too late: fetch the next panel's lines now.
        if (prefetch_next) {
          for (int r = 0; r < kMr; ++r) {
            _mm_prefetch(reinterpret_cast<const char*>(src + ((kMr + r) * lda + k0) * 4), _MM_HINT_T0);
          }
        }
        TransposeBlock(src + k0 * 4, lda * 4, nrow, Mask16(nk), false, nk, panel + k0 * kMr, kMr,
                       kMrMask);
      }
    } else {
      const __mmask16 m = Mask16(nrow);
      for (int64_t k = 0; k < kc; ++k) {
        _mm512_mask_storeu_ps(panel + k * kMr, kMrMask, _mm512_maskz_loadu_ps(m, a + k * lda + r0));
      }
    }
  }
}

void PackABf16(const BF16* a, int64_t lda, bool trans, int64_t rows, int64_t kc, uint32_t* ap) {
  const int64_t steps = (kc + 1) / 2;
  for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
    const int nrow = static_cast<int>(Min(kMr, rows - r0));
    uint32_t* panel = ap + r0 * steps;
    if (!trans) {
      // Row i's pairs are 32-bit words in memory: a 32-bit transpose.
      const auto* src = reinterpret_cast<const std::byte*>(a + r0 * lda);
      for (int64_t s0 = 0; s0 < steps; s0 += 16) {
        const int ns = static_cast<int>(Min(16, steps - s0));
        TransposeBlock(src + s0 * 4, lda * 2, nrow, Mask32(kc - 2 * s0), true, ns,
                       panel + s0 * kMr, kMr, kMrMask);
      }
    } else {
      for (int64_t s = 0; s < steps; ++s) {
        const BF16* lo = a + 2 * s * lda + r0;
        const BF16* hi = 2 * s + 1 < kc ? lo + lda : nullptr;
        _mm512_mask_storeu_epi32(panel + s * kMr, kMrMask, PairRows(lo, hi, nrow));
      }
    }
  }
}

void PackBF32(const float* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp) {
  uint32_t* out = reinterpret_cast<uint32_t*>(bp);
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    const int64_t ncol = Min(kNr, cols - c0);
    uint32_t* panel = out + c0 * kc;
    if (!trans) {
      const __mmask16 m0 = Mask16(ncol), m1 = Mask16(ncol > 16 ? ncol - 16 : 0);
      const float* src = b + c0;
      for (int64_t k = 0; k < kc; ++k) {
        _mm512_storeu_ps(panel + k * kNr, _mm512_maskz_loadu_ps(m0, src + k * ldb));
        _mm512_storeu_ps(panel + k * kNr + 16, _mm512_maskz_loadu_ps(m1, src + k * ldb + 16));
      }
    } else {
      for (int half = 0; half < 2; ++half) {
        const int nj = static_cast<int>(ncol > 16 * half ? Min(16, ncol - 16 * half) : 0);
        const auto* src = reinterpret_cast<const std::byte*>(b + (c0 + 16 * half) * ldb);
        for (int64_t k0 = 0; k0 < kc; k0 += 16) {
          const int nk = static_cast<int>(Min(16, kc - k0));
          TransposeBlock(src + k0 * 4, ldb * 4, nj, Mask16(nk), false, nk,
                         panel + k0 * kNr + 16 * half, kNr, 0xFFFF);
        }
      }
    }
  }
}

void PackBBf16(const BF16* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, uint32_t* bp) {
  const int64_t steps = (kc + 1) / 2;
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    const int64_t ncol = Min(kNr, cols - c0);
    uint32_t* panel = bp + c0 * steps;
    if (!trans) {
      const int64_t n0 = Min(16, ncol), n1 = ncol > 16 ? ncol - 16 : 0;
      for (int64_t s = 0; s < steps; ++s) {
        const BF16* lo = b + 2 * s * ldb + c0;
        const BF16* hi = 2 * s + 1 < kc ? lo + ldb : nullptr;
        _mm512_storeu_si512(panel + s * kNr, PairRows(lo, hi, n0));
        _mm512_storeu_si512(panel + s * kNr + 16,
                            PairRows(lo + 16, hi != nullptr ? hi + 16 : nullptr, n1));
      }
    } else {
      for (int half = 0; half < 2; ++half) {
        const int nj = static_cast<int>(ncol > 16 * half ? Min(16, ncol - 16 * half) : 0);
        const auto* src = reinterpret_cast<const std::byte*>(b + (c0 + 16 * half) * ldb);
        for (int64_t s0 = 0; s0 < steps; s0 += 16) {
          const int ns = static_cast<int>(Min(16, steps - s0));
          TransposeBlock(src + s0 * 4, ldb * 2, nj, Mask32(kc - 2 * s0), true, ns,
                         panel + s0 * kNr + 16 * half, kNr, 0xFFFF);
        }
      }
    }
  }
}

}  // namespace anvil::kernels::gemm_internal::avx512
