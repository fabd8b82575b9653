// RMSNorm over the last dimension of a [rows, dim] activation, fused:
//   rstd[r] = 1 / sqrt(mean_c(x[r, c]^2) + eps),   y[r, c] = x[r, c] * rstd[r] * w[c].
// Math in f32; x/y (and dy/dx) are f32 or bf16 (y rounded once, RNE); w, rstd
// and dweight are f32. Gradient rule: dx is overwritten, dweight accumulates (+=).
// Batch invariant: a row's y, rstd and dx depend only on that row (each row is
// reduced in one fixed order); dweight is independent of the thread count.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

// Forward over `rows` contiguous rows of `dim`. `rstd` ([rows], f32) is what
// backward needs; pass nullptr when there is no backward (inference). Per row:
//   ss = sum of x^2 in the tier's fixed blocked order (f32),
//   rstd = 1 / sqrt(ss / dim + eps),  y = (x * rstd) * w.
// `y` may alias `x` (same dtype).
void RmsNormForward(const KernelCtx& ctx, int64_t rows, int64_t dim, const float* x,
                    const float* weight, float eps, float* y, float* rstd);
void RmsNormForward(const KernelCtx& ctx, int64_t rows, int64_t dim, const BF16* x,
                    const float* weight, float eps, BF16* y, float* rstd);

// Backward from the forward's x and rstd:
//   dx[r, c] = rstd * (w[c] dy[r, c]) - x[r, c] * rstd^3 / dim * sum_c' w dy x   (=)
//   dweight[c] += sum over rows, in row order, of dy[r, c] * x[r, c] * rstd[r]  (+=)
// dweight[c]'s bits depend on nothing but the inputs: an f32 partial starts
// at 0, takes fma(dy * x, rstd, partial) for rows 0, 1, ... in order, and is
// added to dweight[c] once. Threads take blocks of rows, read each block's x
// and dy from DRAM once, and hand the partials on from block to block in row
// order (they live in thread 0's scratch: dim floats, and a cache line per
// 4096 columns).
// `dx` may alias `dy` (same dtype); it must not alias `x`.
void RmsNormBackward(const KernelCtx& ctx, int64_t rows, int64_t dim, const float* x,
                     const float* weight, const float* rstd, const float* dy, float* dx,
                     float* dweight);
void RmsNormBackward(const KernelCtx& ctx, int64_t rows, int64_t dim, const BF16* x,
                     const float* weight, const float* rstd, const BF16* dy, BF16* dx,
                     float* dweight);

}  // namespace anvil::kernels
