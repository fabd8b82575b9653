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
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal::avx2 {

inline constexpr int kMr = 6;
inline constexpr int kNr = 16;
static_assert(kAvx2.mr == kMr && kAvx2.nr == kNr);

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

}  // namespace anvil::kernels::gemm_internal::avx2
