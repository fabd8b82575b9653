// AVX2 GEMM pieces shared by its units (packing, packed driver, streaming
// path). Include only from units compiled with anvil_isa_source(AVX2).
//
// Packed layouts, in f32 words (bf16 inputs are widened exactly while packing):
//   A block: micro-panels of kMr rows; panel q holds rows [q*kMr, q*kMr + kMr)
//            k-major: word (k, r) at q*kMr*kc + k*kMr + r.
//   B block: micro-panels of kNr columns; panel q: word (k, j) at
//            q*kNr*kc + k*kNr + j.
// Rows/columns past the matrix are zero, so edge tiles run the same
// arithmetic as full ones.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal::avx2 {

inline constexpr int kMr = 6;
inline constexpr int kNr = 16;
static_assert(kAvx2.mr == kMr && kAvx2.nr == kNr);

// Lanes [0, n) set (n may be negative or above 8).
inline __m256i LaneMask(int64_t n) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int64_t c = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(c)), lanes);
}

// The first n of 8 values at p as f32 (bf16 widened exactly), zero past them;
// nothing past them is read.
inline __m256 Load8(const float* p, int64_t n) {
  if (n >= 8) return _mm256_loadu_ps(p);
  return _mm256_maskload_ps(p, LaneMask(n));
}
inline __m256 Load8(const BF16* p, int64_t n) {
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

// `a` points at op(A)[i0, p0] as stored (trans: A is [k, m]); packs rows
// [0, rows) x k [0, kc) into ceil(rows / kMr) panels.
void PackA(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap);
void PackA(const BF16* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap);
// `b` points at op(B)[p0, j0] as stored (trans: B is [n, k]); packs k [0, kc) x
// columns [0, cols) into ceil(cols / kNr) panels.
void PackB(const float* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp);
void PackB(const BF16* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp);

// bf16 <-> f32 rows: widening is exact; rounding is to nearest even with NaN
// -> 0x7FFF (convert.h's F32ToBF16).
void WidenRow(const BF16* src, float* dst, int64_t n);
void RoundRow(const float* src, BF16* dst, int64_t n);

// The streaming path for small M with trans_b == kN (gemm_avx2_decode.cc);
// uses 24 KiB of scratch.
void DecodeRegion(const Problem& p, const Region& r, std::byte* scratch);
// GemmFp8's streaming path from B laid out for it (p.fp8->stream_b;
// gemm_avx2_fp8_decode.cc); A's rows decoded into scratch.
void DecodeFp8Region(const Problem& p, const Region& r, std::byte* scratch);

}  // namespace anvil::kernels::gemm_internal::avx2
