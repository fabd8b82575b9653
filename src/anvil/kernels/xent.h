// Cross-entropy fused with softmax over a [rows, V] logits buffer, never
// materialising probabilities. Forward reads each row once from memory: it
// walks the row in fixed chunks of 2048 values (in L1), takes the chunk's
// lane-wise max, rescales the running lane-wise sum of exp and adds the
// chunk's exp(x - max); lanes are combined at the end in a fixed tree. So a
// row's lse depends only on that row and V (batch invariant), never on threads.
//   lse[r]  = log(sum_v exp(x[r, v]))
//   loss[r] = lse[r] - x[r, target[r]] + z_loss_coef * lse[r]^2
// Backward (the gradient of loss[r] * dloss[r]), elementwise:
//   dlogits[r, v] = (softmax_v * (1 + 2 z_loss_coef lse) - [v == target]) * dloss[r]
// Rows whose target is ignore_index have loss 0, lse 0, zero gradient, and
// do not count in valid_rows (the mean's denominator). exp is simd.h's Exp.
// logits are f32 or bf16 (widened exactly); dlogits has the logits' dtype.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

struct CrossEntropyStats {
  int64_t valid_rows = 0;  // rows whose target is not ignore_index
  double loss_sum = 0;     // sum of loss[r] over rows, in row order (z-loss included)
  double z_loss_sum = 0;   // sum of z_loss_coef * lse^2 over valid rows, in row order
};

// targets[r] must be in [0, vocab) or equal ignore_index (CHECKed, naming the
// row). loss and lse are [rows] f32 (lse is what backward needs). Per row, in
// f32: M = max, S = sum exp(x - M) (chunked as above), lse = M + log(S) (the
// log in double, rounded once); loss in double from the f32 lse and logit,
// rounded once. The mean loss is loss_sum / valid_rows.
CrossEntropyStats CrossEntropyForward(const KernelCtx& ctx, int64_t rows, int64_t vocab,
                                      const float* logits, const int32_t* targets,
                                      int32_t ignore_index, float z_loss_coef, float* loss,
                                      float* lse);
CrossEntropyStats CrossEntropyForward(const KernelCtx& ctx, int64_t rows, int64_t vocab,
                                      const BF16* logits, const int32_t* targets,
                                      int32_t ignore_index, float z_loss_coef, float* loss,
                                      float* lse);

// The stats CrossEntropyForward returns, from per-row loss and lse already
// computed (by one call or by several over row ranges): the same sums in row
// order, so chunked callers get the bits of one call.
CrossEntropyStats CrossEntropyRowStats(int64_t rows, const int32_t* targets, int32_t ignore_index,
                                       float z_loss_coef, const float* loss, const float* lse);

// dloss[r] (nullable: 1 for every row) times dloss_scale is row r's upstream
// gradient g (for the mean loss: dloss = nullptr, dloss_scale = 1 / valid_rows).
// In f32: a = g * (1 + 2 z lse); dlogits[v] = exp(x[v] - lse) * a, and at the
// target exp(x[t] - lse) * a - g. `dlogits` may be `logits` (in place).
void CrossEntropyBackward(const KernelCtx& ctx, int64_t rows, int64_t vocab, const float* logits,
                          const int32_t* targets, int32_t ignore_index, float z_loss_coef,
                          const float* lse, const float* dloss, float dloss_scale, float* dlogits);
void CrossEntropyBackward(const KernelCtx& ctx, int64_t rows, int64_t vocab, const BF16* logits,
                          const int32_t* targets, int32_t ignore_index, float z_loss_coef,
                          const float* lse, const float* dloss, float dloss_scale, BF16* dlogits);

}  // namespace anvil::kernels
