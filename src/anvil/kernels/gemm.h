// GEMM: C = op(A)·op(B) or C += op(A)·op(B), row-major, f32 or bf16 inputs,
// f32 accumulation, f32 or bf16 output. Batch-invariant (DESIGN.md contract 2):
// every C element is reduced over K in one fixed order that depends only on K,
// the input dtype and the ISA tier, never on M, N, threads or the layout.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/core/cpu_features.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

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
//   (2j, 2j+1) from the block start with vdpbf16ps). Block partials are added
//   to the running sum in increasing block order; with `accumulate` the
//   running sum starts from C's old value (widened exactly from bf16). A bf16
//   C is rounded once, to nearest even, at the end.
// So a row's result is bitwise the same whatever M, the other rows, N, the
// thread count or the code path (small-M calls stream B without packing it
// and still give the same bits). Different ISA tiers may differ in the last
// bits (they agree with the double-precision reference within the bound
// that gemm_test.cc derives).
// C must not overlap A or B. Operands need no particular alignment.
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const float* b, float* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const float* b, BF16* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const BF16* b, float* c);
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const BF16* b, BF16* c);

// The K block length of the fixed summation order for `isa` and inputs of
// `bf16_inputs` type (a compile-time constant of each tier).
int GemmKBlock(Isa isa, bool bf16_inputs);

}  // namespace anvil::kernels
