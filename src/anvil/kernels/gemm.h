// GEMM: C = op(A)·op(B) or C += op(A)·op(B), row-major, f32, bf16 or FP8
// inputs (FP8 with their scales: GemmFp8 below), f32 accumulation, f32 or
// bf16 output. Batch-invariant (DESIGN.md contract 2):
// every C element is reduced over K in one fixed order that depends only on K,
// the input dtype and the ISA tier, never on M, N, threads or the layout.
#pragma once

#include <cstdint>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/core/cpu_features.h"
#include "anvil/kernels/ctx.h"
#include "anvil/kernels/quant.h"

namespace anvil::kernels {
namespace gemm_internal {
struct Fp8Problem;  // cpu/gemm_internal.h
}  // namespace gemm_internal

// Whether an operand is used as stored (kN) or transposed (kT).
enum class Trans : uint8_t { kN, kT };

// The problem: C[m, n] (+)= op(A)[m, k] · op(B)[k, n]. All matrices are
// row-major with leading dimensions (row strides) in elements:
//   A: trans_a == kN: stored [m, k], lda >= k;   kT: stored [k, m], lda >= m.
//   B: trans_b == kN: stored [k, n], ldb >= n;   kT: stored [n, k], ldb >= k.
//   C: stored [m, n], ldc >= n.
// A leading dimension of 0 means the tight one. Training uses NN for the
// forward (B = W[in, out]), NT for dX = dY·Wᵀ and TN for dW = Xᵀ·dY.
struct GemmArgs {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  Trans trans_a = Trans::kN;
  Trans trans_b = Trans::kN;
  int64_t lda = 0;
  int64_t ldb = 0;
  int64_t ldc = 0;
  // false: C = op(A)·op(B) (C's old contents are never read).
  // true:  C = C + op(A)·op(B) (e.g. parameter gradients).
  bool accumulate = false;
};

// The four entry points: inputs both f32 or both bf16; output f32 or bf16.
// The summation order, fixed for a (input dtype, ISA tier) pair:
//   K is cut into blocks of GemmKBlock() elements from k = 0. Within a block
//   an f32 partial starts at +0 and takes the products in increasing k with
//   one rounding each (an FMA; bf16 inputs on AVX-512 take k in pairs
//   (2j, 2j+1) from the block start with vdpbf16ps, or, in a KernelCtx that
//   uses AMX, 16 pairs at a time with tdpbf16ps, whose own rounding differs
//   from both). Block partials are added to the running sum in increasing
//   block order; with `accumulate` the running sum starts from C's old
//   value (widened exactly from bf16). A bf16 C is rounded once, to nearest
//   even, at the end.
// So a row's result is bitwise the same whatever M, the other rows, N, the
// thread count or the code path (small-M calls stream B without packing it
// and still give the same bits). Different ISA tiers, and AMX or not, may
// differ in the last bits (they agree with the double-precision reference
// within the bound that gemm_test.cc derives).
// C must not overlap A or B. Operands need no particular alignment.
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const float* b, float* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const float* b, BF16* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const BF16* b, float* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const BF16* b, BF16* c);

// The K block length of the fixed summation order for `isa` and inputs of
// `bf16_inputs` type (a compile-time constant of each tier).
int GemmKBlock(Isa isa, bool bf16_inputs);

// ---- B packed once ---------------------------------------------------------

// An f32 or bf16 B packed for the packed path of ctx's tier and kept for
// many calls with the same B (decoding multiplies by a model's weights at
// every step until they change). Gemm with it gives the bits of Gemm on the
// original B (the same kernel, K blocks and order: packing only copies)
// without packing B again in every call; a call with few enough rows to
// stream B reads the original instead, as Gemm would. The original must
// outlive it; Repack follows changes to its values. Tiers without a packed
// path (scalar) keep no copy.
class PackedB {
 public:
  PackedB() = default;
  // B as `args` describes it (k, n, trans_b, ldb; the rest is ignored).
  PackedB(const KernelCtx& ctx, const GemmArgs& args, const float* b);
  PackedB(const KernelCtx& ctx, const GemmArgs& args, const BF16* b);
  // Packs B's current values (for ctx's tier, which may be another now).
  void Repack(const KernelCtx& ctx);
  const void* original() const { return b_; }
  bool bf16() const { return bf16_; }
  Isa tier() const { return tier_; }
  bool amx() const { return amx_; }  // packed for AMX tiles (KernelCtx::amx)
  int64_t bytes() const { return static_cast<int64_t>(packed_.size()); }

 private:
  friend void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const PackedB& b,
                   float* c);
  friend void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const PackedB& b,
                   float* c);
  friend void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const PackedB& b,
                   BF16* c);
  // The Gemm overloads' body (A of B's type, C as bf16_out says).
  static void Multiply(const KernelCtx& ctx, const GemmArgs& args, bool bf16_out, const void* a,
                       const PackedB& b, void* c);
  GemmArgs args_{};
  const void* b_ = nullptr;
  bool bf16_ = false;
  Isa tier_ = Isa::kScalar;
  bool amx_ = false;
  AlignedBuffer packed_;
};

// C (+)= op(A) · B with B packed (args' k, n, trans_b and ldb must be the
// packed ones; A of B's type; ctx on the tier it was packed for).
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const PackedB& b, float* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const PackedB& b, float* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const PackedB& b, BF16* c);

// ---- FP8 -------------------------------------------------------------------
// An FP8 operand as quant.h writes it: codes and their scales. x ~ value(q) * s.
enum class Fp8Scaling : uint8_t {
  kTensor,     // one factor `scale` (quant.h's 1 / TensorScale)
  kRowBlocks,  // f32 `scales` per (stored row, block of `block` along K): A stored [m, k]
               // (QuantizeRows), or B stored [n, k] with trans_b (QuantizeColumnsTransposed)
  kTiles,      // f32 `scales` per `block` x `block` tile of the stored operand (QuantizeTiles):
               // B (weights) in either orientation
  kMx,         // E8M0 `e8m0` per (stored row, block of `block` along K), as kRowBlocks
};
struct Fp8Operand {
  const uint8_t* data = nullptr;  // codes, stored as GemmArgs says (ld in elements)
  Fp8Format format = Fp8Format::kE4M3;
  Fp8Scaling scaling = Fp8Scaling::kTensor;
  float scale = 1.0f;              // kTensor
  const float* scales = nullptr;   // kRowBlocks, kTiles
  const uint8_t* e8m0 = nullptr;   // kMx
  int64_t block = 128;             // K extent of a scale block (kMx: 32)
};

// C (+)= op(A)·op(B) from FP8 operands (A stored [m, k]: trans_a must be kN;
// B either way), f32 accumulation, f32 or bf16 C. Each operand element is
// decoded to value(q) (exact in bf16), times its E8M0 scale for kMx (exact
// too, within bf16's normal range: 2^-126 and up). Without block scaling
// (both operands kMx) the sum is the decode format's Gemm order on the
// decoded values. With it (kTensor, kRowBlocks or kTiles on either side),
// with S the K block — the scale block (128) when either operand has
// kRowBlocks or kTiles, else the decode format's Gemm K block — and P_b one
// block's sum from zero in that Gemm's order:
//   C = [C +] sum over blocks b, in order, of  P_b * (sa(i, b) * sb(b, j)),
// each block's term added as one fused multiply-add (fma(P_b, sa * sb, C);
// the first block without accumulate is P_b * (sa * sb)), sa/sb the blocks'
// factors (1 for kMx, whose scales are in the decoded values). Block scaling
// needs both operands' blocks to be S long along K and aligned at k = 0
// (DeepSeek-V3's promotion of partial sums to f32 every 128 of K). Batch
// invariant and thread-count independent like Gemm.
//
// `decode` picks the dot-product format the decoded values meet in (both
// exact): bf16 (vdpbf16ps on AVX-512 with AVX512_BF16, AMX tiles in a
// context that uses them where S is a multiple of 32; other tiers widen it
// to f32) or f32 (the f32 kernel). The faster one depends on the machine (a
// bf16 dot at twice the f32 rate on Zen 5, at half of it on some Xeons, AMX
// far above it): callers choose from the measured peaks. The summation order is that format's Gemm.
enum class Fp8Decode : uint8_t { kBf16, kF32 };
void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a, const Fp8Operand& b,
             float* c, Fp8Decode decode = Fp8Decode::kBf16);
void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a, const Fp8Operand& b,
             BF16* c, Fp8Decode decode = Fp8Decode::kBf16);
// The K block of GemmFp8's summation order for these operands on `isa`.
int64_t GemmFp8KBlock(Isa isa, const Fp8Operand& a, const Fp8Operand& b,
                      Fp8Decode decode = Fp8Decode::kBf16);

// An FP8 B kept for many GemmFp8 calls (a model's quantized weights while it
// decodes, one row or a few per call): its scales and, on the SIMD tiers,
// its panels decoded as GemmFp8 packs them for ctx's tier, the `decode`
// format and A operands scaled as `a_like` is (its scaling, block and so the
// K block of the order; its data is not read); the scalar tier keeps a copy
// of the codes. GemmFp8 with it gives the bits of GemmFp8 on the original
// operands without decoding all of B in every call (for a few rows, where
// the panels would outgrow the caches, from the codes laid out to be
// streamed once and decoded in registers: the same bits). Nothing of the
// original is kept: pack again after it changes.
class PackedFp8B {
 public:
  // Whether calls of a few rows stream B's codes: kAuto where the decoded
  // panels would not stay in the L2 caches (within them the panels are
  // faster; from 5 rows only for panels of over 16 MiB), kAlways wherever
  // the stream can be used (up to 8 rows), kNever. The stream needs the
  // AVX2 tier, or AVX-512 with AVX512_VBMI (and bf16 decode not on AMX,
  // which has no streaming path); K blocks of at least 32 (even, on
  // AVX-512), K up to 16384, and no NaN code in B.
  enum class Streaming : uint8_t { kAuto, kAlways, kNever };
  PackedFp8B() = default;
  // B as `args` describes it (k, n, trans_b, ldb; the rest is ignored).
  PackedFp8B(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a_like,
             const Fp8Operand& b, Fp8Decode decode, Streaming streaming = Streaming::kAuto) {
    Pack(ctx, args, a_like, b, decode, streaming);
  }
  // Packs anew (the storage is kept where the sizes stay).
  void Pack(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a_like,
            const Fp8Operand& b, Fp8Decode decode, Streaming streaming = Streaming::kAuto);
  PackedFp8B(PackedFp8B&&) = default;  // b_ points into the moved vectors' storage
  PackedFp8B& operator=(PackedFp8B&&) = default;
  PackedFp8B(const PackedFp8B&) = delete;
  PackedFp8B& operator=(const PackedFp8B&) = delete;
  // B's layout (the recipe may store it either way).
  Trans trans_b() const { return args_.trans_b; }
  // Everything it keeps (codes or panels, scales, the stream).
  int64_t bytes() const;
  // Whether calls of m rows stream B's codes (else they read the panels).
  bool Streams(int64_t m) const;

 private:
  friend void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a,
                      const PackedFp8B& b, float* c);
  // The stream layout where this B and the tier allow it (else nothing).
  void LayOutStream(const gemm_internal::Fp8Problem& f, Streaming streaming);
  GemmArgs args_{};  // k, n, trans_b of B; ldb tight (the copy's)
  Fp8Operand a_like_{}, b_{};  // b_: the copy below
  Fp8Decode decode_ = Fp8Decode::kBf16;
  bool amx_ = false;  // packed for AMX tiles (KernelCtx::amx)
  Isa tier_ = Isa::kScalar;
  std::vector<uint8_t> codes_;  // the scalar tier's (it reads them); empty on the others
  std::vector<float> scales_;
  std::vector<uint8_t> e8m0_;
  AlignedBuffer packed_;  // the SIMD tiers' decoded panels
  // For calls of a few rows, B laid out to be streamed and decoded in
  // registers, a byte a weight (empty where not used; the layout is
  // gemm_internal::Fp8StreamB's for the tier).
  AlignedBuffer stream_codes_;
  std::vector<uint16_t> stream_words_;
  std::vector<uint8_t> stream_e8m0_;
  AlignedBuffer stream_factors_;  // f32
  int64_t stream_max_rows_ = 0;   // calls of up to this many rows stream
};

// C (+)= A · B as GemmFp8 with B packed (args' k, n, trans_b must be the
// packed ones, A scaled as its a_like; ctx on the tier it was packed for).
void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a,
             const PackedFp8B& b, float* c);

}  // namespace anvil::kernels
