// AVX2 packing of A and B blocks into the micro-panel layouts of gemm_avx2.h,
// and the bf16 <-> f32 row conversions of the AVX2 units. Masked loads bound
// every read to the matrix; transposes are 8x8 in registers; bf16 is widened
// to f32 on the way (exact: a shift).
#include "anvil/kernels/cpu/gemm_avx2.h"

namespace anvil::kernels::gemm_internal::avx2 {
namespace {

int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }

// In-place transpose of 8 rows of 8 lanes: v[i] lane j <- v[j] lane i.
[[gnu::always_inline]] inline void Transpose8x8(__m256 v[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int g = 0; g < 2; ++g) {
    u[4 * g + 0] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
    u[4 * g + 1] = _mm256_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
    u[4 * g + 2] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
    u[4 * g + 3] = _mm256_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
  }
  for (int c = 0; c < 4; ++c) {
    v[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    v[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

// Stores lanes [0, 6) of v (a kMr-row step of an A panel).
void Store6(float* dst, __m256 v) {
  _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
  _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
}

// Up to 8 stored rows (`rows` valid, the rest zero) x 8 values from `src`
// (`n` valid along the row) transposed: out[s] lane i = row i's value s.
template <typename T>
void LoadTransposed(const T* src, int64_t ld, int64_t rows, int64_t n, __m256 out[8]) {
  for (int i = 0; i < 8; ++i) out[i] = i < rows ? Load8(src + i * ld, n) : _mm256_setzero_ps();
  Transpose8x8(out);
}

template <typename T>
void PackAT(const T* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap) {
  for (int64_t r0 = 0; r0 < rows; r0 += kMr) {
    const int64_t nrow = Min(kMr, rows - r0);
    float* panel = ap + r0 * kc;  // (r0 / kMr) * kMr * kc
    if (trans) {                  // a row of the stored A^T holds one k's values of all rows
      for (int64_t k = 0; k < kc; ++k) Store6(panel + k * kMr, Load8(a + k * lda + r0, nrow));
      continue;
    }
    const T* src = a + r0 * lda;
    const bool prefetch_next = r0 + kMr < rows;
    for (int64_t k0 = 0; k0 < kc; k0 += 8) {
      // A usually comes from DRAM in short row segments the hardware
      // prefetcher learns too late: fetch the next panel's lines now.
      if (prefetch_next && k0 % (64 / sizeof(T)) == 0) {
        for (int r = 0; r < kMr; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(src + (kMr + r) * lda + k0), _MM_HINT_T0);
        }
      }
      const int64_t nk = Min(8, kc - k0);
      __m256 v[8];
      LoadTransposed(src + k0, lda, nrow, nk, v);
      for (int64_t s = 0; s < nk; ++s) Store6(panel + (k0 + s) * kMr, v[s]);
    }
  }
}

template <typename T>
void PackBT(const T* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp) {
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    const int64_t ncol = Min(kNr, cols - c0);
    float* panel = bp + c0 * kc;
    if (!trans) {
      const int64_t n1 = ncol > 8 ? ncol - 8 : 0;
      for (int64_t k = 0; k < kc; ++k) {
        const T* row = b + k * ldb + c0;
        _mm256_store_ps(panel + k * kNr, Load8(row, ncol));
        _mm256_store_ps(panel + k * kNr + 8, Load8(row + 8, n1));
      }
      continue;
    }
    for (int half = 0; half < 2; ++half) {
      const int64_t nj = ncol > 8 * half ? Min(8, ncol - 8 * half) : 0;
      const T* src = b + (c0 + 8 * half) * ldb;
      for (int64_t k0 = 0; k0 < kc; k0 += 8) {
        const int64_t nk = Min(8, kc - k0);
        __m256 v[8];
        LoadTransposed(src + k0, ldb, nj, nk, v);
        for (int64_t s = 0; s < nk; ++s) _mm256_store_ps(panel + (k0 + s) * kNr + 8 * half, v[s]);
      }
    }
  }
}

// Eight f32 rounded to bf16 (RNE, NaN -> 0x7FFF) in the low 128 bits.
__m128i Round8(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF)),
                                         _mm256_set1_epi32(0x7F800000));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FFF), nan);
  // packus works within 128-bit lanes: gather the two lanes' four words.
  r = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
  return _mm256_castsi256_si128(r);
}

}  // namespace

void WidenRow(const BF16* src, float* dst, int64_t n) {
  for (int64_t j = 0; j < n; j += 8) {
    const __m256 v = Load8(src + j, n - j);
    if (n - j >= 8) {
      _mm256_storeu_ps(dst + j, v);
    } else {
      _mm256_maskstore_ps(dst + j, LaneMask(n - j), v);
    }
  }
}

void RoundRow(const float* src, BF16* dst, int64_t n) {
  for (int64_t j = 0; j < n; j += 8) {
    const __m128i r = Round8(Load8(src + j, n - j));
    if (n - j >= 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j), r);
    } else {
      alignas(16) uint16_t tmp[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(tmp), r);
      for (int64_t i = 0; i < n - j; ++i) dst[j + i].bits = tmp[i];
    }
  }
}

void PackA(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap) {
  PackAT(a, lda, trans, rows, kc, ap);
}
void PackA(const BF16* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap) {
  PackAT(a, lda, trans, rows, kc, ap);
}
void PackB(const float* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp) {
  PackBT(b, ldb, trans, cols, kc, bp);
}
void PackB(const BF16* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp) {
  PackBT(b, ldb, trans, cols, kc, bp);
}

}  // namespace anvil::kernels::gemm_internal::avx2
