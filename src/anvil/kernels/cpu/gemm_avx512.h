// AVX-512 GEMM pieces shared by its units (packing, packed driver, streaming
// decode path). Include only from units compiled with anvil_isa_source(AVX512).
//
// Packed layouts, all in 32-bit words (f32 values, or bf16 k-pairs with the
// even k in the low half, an odd K's last pair padded with zero):
//   A block: micro-panels of kMr rows; panel q holds rows [q*kMr, q*kMr + kMr)
//            k-major: word (s, r) at q*kMr*steps + s*kMr + r.
//   B block: micro-panels of kNr columns; panel q: word (s, j) at
//            q*kNr*steps + s*kNr + j.
// steps = kc for f32, ceil(kc / 2) for bf16. Rows/columns past the matrix
// are zero, so edge tiles run the same arithmetic as full ones.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal::avx512 {

inline constexpr int kMr = 14;
inline constexpr int kNr = 32;
static_assert(kAvx512F32.mr == kMr && kAvx512F32.nr == kNr);
static_assert(kAvx512Bf16.mr == kMr && kAvx512Bf16.nr == kNr);
inline constexpr int kKcF32 = kAvx512F32.kc;
inline constexpr int kKcBf16 = kAvx512Bf16.kc;
static_assert(kKcBf16 % 2 == 0, "bf16 K blocks must hold whole pairs");

// `a` points at op(A)[i0, p0] as stored (trans: A is [k, m]); packs rows
// [0, rows) x k [0, kc) into ceil(rows / kMr) panels.
void PackAF32(const float* a, int64_t lda, bool trans, int64_t rows, int64_t kc, float* ap);
void PackABf16(const BF16* a, int64_t lda, bool trans, int64_t rows, int64_t kc, uint32_t* ap);
// `b` points at op(B)[p0, j0] as stored (trans: B is [n, k]); packs k [0, kc) x
// columns [0, cols) into ceil(cols / kNr) panels.
void PackBF32(const float* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, float* bp);
void PackBBf16(const BF16* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, uint32_t* bp);

// GemmFp8's packing of FP8 operand rows, as gemm_fp8.h's Fp8Pack::Pack does
// it (the same words, bit for bit, same arguments), with register
// transposes for rows stored [rows, k]: k_panel (kMr or kNr) rows a panel,
// f32 words or bf16 k-pairs. `values`: the format's 256 values; `bf16`:
// their bf16 bits (values exact in bf16, NaN as 0x7FFF: the formats'
// tables). False (nothing written) where it does not apply: MX scales with
// `trans`, or MX blocks or a start p0 that are not a multiple of the chunk
// it decodes (16 k, 32 for pairs). Decodes bf16 pairs with PackFp8PairsVbmi
// where the CPU has AVX512_VBMI, everything else with PackFp8Gathers.
bool PackFp8Vector(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                   bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int64_t k_total,
                   int k_panel, bool pairs, uint32_t* out);
// The two decoders (tested each against the scalar packer): gathers of the
// tables, and (gemm_avx512_fp8_pack.cc; bf16 pairs only) AVX512_VBMI byte
// permutes of the bf16 table.
bool PackFp8Gathers(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                    bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc,
                    int64_t k_total, int k_panel, bool pairs, uint32_t* out);
bool PackFp8PairsVbmi(const Fp8Operand& o, const uint16_t* bf16, int64_t ld, bool trans,
                      int64_t r0, int64_t rows, int64_t p0, int64_t kc, int64_t k_total,
                      int k_panel, uint32_t* out);

// A bf16 C's rows widened to the f32 partials, and the partials rounded
// back (nearest even, NaN -> 0x7FFF): the driver's bf16 epilogues (AVX-512
// and AMX tiers).
void WidenRow(const BF16* src, float* dst, int64_t n);
void RoundRow(const float* src, BF16* dst, int64_t n);

// The streaming path for small M with trans_b == kN (gemm_avx512_decode.cc);
// uses 24 KiB of scratch.
void DecodeRegion(const Problem& p, const Region& r, std::byte* scratch);
// GemmFp8's streaming path from B laid out for it (p.fp8->stream_b; needs
// AVX512_VBMI; gemm_avx512_fp8_decode.cc); A's rows decoded into scratch.
void DecodeFp8Region(const Problem& p, const Region& r, std::byte* scratch);

}  // namespace anvil::kernels::gemm_internal::avx512
