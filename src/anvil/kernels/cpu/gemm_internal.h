// GEMM internals shared by the dispatcher (gemm.cc) and the per-ISA units: the
// normalised problem, a thread's share of C, and each tier's blocking. Only
// plain data here (no inline functions), so ISA units can include it freely.
#pragma once

#include <cstddef>
#include <cstdint>

#include "anvil/kernels/gemm.h"

namespace anvil::kernels::gemm_internal {

// An FP8 B laid out for the streaming (decode) path, which reads its codes
// once and decodes them in registers (PackedFp8B builds it for the tier the
// calls run on; gemm_avx512_fp8_decode.cc and gemm_avx2_fp8_decode.cc read
// it). B has no NaN code. Strips of strip_cols columns, each contiguous over
// all K (read front to back); past k or n, code 0 (+0 in both formats):
//   AVX-512 (kStreamPairCols): strip s holds ceil(k / 2) lines of 64 bytes,
//            line r the codes of rows (2r, 2r + 1), column c (of the strip)
//            at byte 16 (c / 4) + 2 (c % 4) + h for c < 16, 16 ((c - 16) / 4)
//            + 8 + 2 (c % 4) + h for the others (h: 0 for row 2r, 1 for
//            2r + 1), so that the byte unpacks give each column's (2r, 2r + 1)
//            pair as one 32-bit word, columns in order;
//   AVX2 (kStreamRowCols): strip s holds k lines of 16 bytes, line r the
//            codes of row r, columns in order.
//   words:   AVX-512: [256] each code's decoded word: bf16 bits (bf16
//            decode) or the high half of the f32 value (f32 decode; the low
//            half is zero for every FP8 value but NaN); a negative code's
//            word is its magnitude's with the sign bit. AVX2: unused.
//   e8m0:    kMx: per strip, per MX block along K, its columns' scale bytes
//            ([strips][ceil(k / block)][strip_cols]).
//   factors: block scaling: per strip, per K block, its columns' factors
//            (Fp8Pack::Factor's; [strips][ceil(k / kblock)][strip_cols], 64-byte aligned).
struct Fp8StreamB {
  // Threads split N in whole register tiles (Blocking::nr): a strip is one.
  static constexpr int64_t kStreamPairCols = 32;
  static constexpr int64_t kStreamRowCols = 16;
  const uint8_t* codes;
  const uint16_t* words;
  const uint8_t* e8m0;
  const float* factors;
  int64_t strip_cols;
  int64_t max_rows;  // calls of up to this many rows stream (PackedFp8B's choice)
};

// GemmFp8's operands with what the packers and the block epilogue need: each
// format's 256 decoded values, and the K block of the summation order.
struct Fp8Problem {
  Fp8Operand a, b;
  const float* value_a;  // [256] value(q) of A's format
  const float* value_b;
  const uint16_t* bf16_a;  // [256] their bf16 bits
  const uint16_t* bf16_b;
  int64_t kblock;     // K block S (gemm.h)
  bool decode_bf16;   // Fp8Decode::kBf16
  bool block_scaled;  // scales applied per block (kTensor, kRowBlocks, kTiles on either side)
  const Fp8StreamB* stream_b;  // B laid out for the streaming path, or null
};

// The driver's element type for FP8 operands (Problem::fp8 says what they
// are), decoded to bf16 k-pairs (kAsBf16, on a tier with a bf16 dot) or f32.
template <bool kAsBf16>
struct Fp8Codes {};
template <typename T>
inline constexpr bool kIsFp8 = false;
template <bool kAsBf16>
inline constexpr bool kIsFp8<Fp8Codes<kAsBf16>> = true;

// A checked call with leading dimensions filled in and type-erased operands.
struct Problem {
  int64_t m, n, k;
  bool trans_a, trans_b;  // true: kT
  int64_t lda, ldb, ldc;
  bool accumulate;
  bool bf16_in;   // A and B are BF16 (else float); also set for FP8 (decoded to bf16)
  bool bf16_out;  // C is BF16 (else float)
  const void* a;
  const void* b;
  void* c;
  const Fp8Problem* fp8;  // FP8 operands (a, b are their codes), else null
  // B already packed whole (PackedBWords' layout; an f32 or bf16 B, or FP8
  // codes decoded): the driver reads its panels instead of packing B. Null:
  // pack per call.
  const uint32_t* packed_b;
  // B comes from DRAM whatever its own size (KernelCtx::weights_outgrow_caches):
  // the decode paths stream it with prefetches. Bits do not depend on it.
  bool b_from_dram;
};

// The part of C one thread computes: rows [m0, m1) x columns [n0, n1).
struct Region {
  int64_t m0, m1, n0, n1;
};

// A tier's blocking. mr x nr is the register tile (mr rows of C broadcast
// from A, nr columns of vectors from B); kc the K block of the fixed
// summation order; the partition gives threads whole tiles.
struct Blocking {
  int mr;
  int nr;
  int kc;
  int decode_max_m;  // M <= this with trans_b == kN may stream B (StreamsB; 0: never)
  int step_align = 1;  // packed steps of a K block rounded up to a multiple of this
};

// AVX-512. Register tile 14x32: 28 zmm accumulators + 2 for B + 1 spare of 32;
// with 2 FMA pipes of latency 4, >= 8 independent chains hide the latency and
// each k step issues 28 FMAs against 2 loads and 14 broadcasts (the load ports
// keep up). kc: 1024 packed steps (f32 k, or bf16 k-pairs). Each K block ends
// in a read-add-write of the C tile, and that costs more than streaming the
// B micro-panel (1024 x 32 x 4 B = 128 KiB) from L2 instead of L1. Measured
// interleaved on 2 threads over M in {4096, 8192}, N in 768..32000, K in
// 768..3072: f32 steps 256 -> 512 +4-9%, 512 -> 1024 +3-6%; bf16 steps
// 256 -> 512 +5-9%, 512 -> 1024 +1%. The A block (kMc x 1024 words =
// 672 KiB) still fits the 1 MiB L2, and a training K up to 1024 (f32) or
// 2048 (bf16) is one block: no partial sums at all.
inline constexpr Blocking kAvx512F32{14, 32, 1024, 32};
inline constexpr Blocking kAvx512Bf16{14, 32, 2048, 32};
// AMX (bf16 inputs on a CPU with AMX-BF16, gemm_amx.cc): a 32 x 32 tile of
// C in four 16 x 16 accumulator tiles, each tdpbf16ps 16 k-pairs deep, so
// steps pad to whole tiles (16). kc as the AVX-512 bf16 kernel's. Up to 16
// rows stream a bf16 B (one A tile's rows), on the tiles too: the
// vdpbf16ps streaming path rounds otherwise.
inline constexpr Blocking kAmxBf16{32, 32, 2048, 16, 16};
// GemmKBlock (and GemmFp8KBlock) answer per ISA tier, AMX or not: callers
// that size work by the K block (the LM head's chunks) see one value.
static_assert(kAmxBf16.kc == kAvx512Bf16.kc);
// AVX2: 16 ymm; a 6x16 tile = 12 accumulators + 2 for B + 1 broadcast. bf16
// is widened to f32 while packing, so both inputs share the f32 kernel.
// kc: 256 x 16 x 4 B = 16 KiB of B micro-panel in L1 (32 KiB on AVX2 parts).
// Streaming takes up to 16 rows (chunks of 6). Up to 32 (ANVIL_ISA=avx2 on
// the Xeon host, twice each) f32 gained up to 10% (32x256x688 163 -> 181
// GFLOP/s) but bf16 lost as much (32x256x688 165 -> 121, 32x512x512 168 ->
// 152): its B is widened again in every chunk.
inline constexpr Blocking kAvx2{6, 16, 256, 16};
// Portable: a row at a time over 64-column strips; kc as AVX2.
inline constexpr Blocking kScalar{1, 64, 256, 0};
// The FP8 streams' strips are whole partition units (two threads never
// share one: each strip's C columns are one thread's).
static_assert(kAvx512F32.nr == Fp8StreamB::kStreamPairCols &&
              kAvx512Bf16.nr == Fp8StreamB::kStreamPairCols &&
              kAvx2.nr == Fp8StreamB::kStreamRowCols);

// The streaming (decode) path holds up to kDecodeChunkRows rows in its
// register strips; up to a tier's decode_max_m rows it runs them in chunks
// of that many, each reading B again, which beats packing B only while B
// stays in the L2 (measured on the Xeon host, 2 threads, medians of 3:
// 32 x 768 x 256 f32 245 -> 356 GFLOP/s, 16 x 512 x 512 160 -> 310, bf16
// 32 x 768 x 768 166 -> 210; but 32 x 8192 x 256, 8 MiB of B, 209 -> 136,
// and at 2 MiB (32 x 1024 x 512 f32) 205 -> 188, single runs).
inline constexpr int64_t kDecodeChunkRows = 8;
inline constexpr int64_t kChunkedDecodeMaxBBytes = int64_t{3} << 19;  // 1.5 MiB
// GemmFp8's streaming path decodes its (at most kDecodeChunkRows) rows of A
// into scratch first: K up to this many keeps them, as f32, and their block
// factors (blocks of >= kFp8StreamMinBlock) within kMinScratchBytes.
inline constexpr int64_t kFp8StreamMaxK = 16384;
inline constexpr int64_t kFp8StreamMinBlock = 32;
// A B whose decoded panels fit the threads' L2 caches is read faster as
// panels than streamed and decoded again (Xeon host, 2 threads, 768 x 768,
// f32 panels of 2.25 MiB: 1-8 rows 85-266 GFLOP/s against 85-214, MXFP8
// 85-301 against 62-136); from 3072 x 768 (9 MiB) streaming wins at 1-4
// rows (91 / 206 against 26 / 108) and from DRAM at every row count.
inline constexpr int64_t kFp8StreamMinPanelBytes = int64_t{4} << 20;
// Up to 4 rows streaming wins past that; from 5 rows the panels keep up
// while they stay in a cache near enough, so more than kFp8StreamFewRows
// rows stream only past kFp8StreamManyRowsMinPanelBytes of panels. 8 rows,
// GFLOP/s stream / panels (FP8, MXFP8): AVX-512 (Xeon) at 9 MiB 220 / 205
// and 176 / 215, at 32 MiB 271 / 213 and 228 / 223, at 256 MiB 251 / 86 and
// 215 / 83; the AVX2 tier (Zen 5, ANVIL_ISA=avx2, since its 5-8 rows decode
// each vector once) at 9 MiB 143 / 149 and 121 / 160, at 32 MiB 144 / 111 and
// 116 / 108, at 64 MiB 137 / 94 and 120 / 94.
inline constexpr int64_t kFp8StreamFewRows = 4;
inline constexpr int64_t kFp8StreamManyRowsMinPanelBytes = int64_t{16} << 20;

// Whether `p` takes the streaming path on a tier with blocking `bl`.
// (Defined in gemm.cc, the baseline unit: no inline functions here.)
bool StreamsB(const Problem& p, const Blocking& bl);
// Rows [first, first + rows) of `p`: A and C offset, everything else kept
// (a streaming pass over a chunk of rows).
Problem RowSlice(const Problem& p, int64_t first, int64_t rows);

// B of `p` (f32, bf16, or FP8 codes: p.fp8) packed whole for a tier's
// driver: for each K block of `kblock` (the tier's kc; GemmFp8's
// fp8->kblock), ceil(n / nr) micro-panels of nr columns as the driver packs
// them, a column taking one word per k step (k, or k-pairs where the tier
// packs bf16, or FP8 decoded to bf16, as `pairs`), block b at word b *
// Steps(kblock) * RoundUp(n, nr); Steps rounds up to bl.step_align.
// Columns [n0, n1) (multiples of nr, or n) of every block; threads split a
// pack by columns.
int64_t PackedBWords(const Problem& p, const Blocking& bl, int64_t kblock, bool pairs);
void PackWholeBAvx512(const Problem& p, int64_t n0, int64_t n1, uint32_t* out);
void PackWholeBAvx2(const Problem& p, int64_t n0, int64_t n1, uint32_t* out);
void PackWholeBAmx(const Problem& p, int64_t n0, int64_t n1, uint32_t* out);

// Per-tier workers: compute region `r` of `p` with thread-private scratch.
// Packed and streaming (decode) paths live behind each; both give the same bits.
void GemmRegionAvx512(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes);
void GemmRegionAvx2(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes);
// bf16 inputs, or FP8 decoded to bf16, on AMX tiles (AmxEnabled()).
void GemmRegionAmx(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes);
void GemmRegionScalar(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes);

// The least per-thread scratch any tier works with; each sizes its blocks to
// what ctx.scratch_bytes() offers (the default 8 MiB gives the tuned sizes).
inline constexpr size_t kMinScratchBytes = size_t{1} << 20;

}  // namespace anvil::kernels::gemm_internal
