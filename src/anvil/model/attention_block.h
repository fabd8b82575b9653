// Attention block: x -> RMSNorm -> QKV GEMM -> RoPE(q, k) -> FlashAttention ->
// O projection -> y = x + that. Backward mirrors it bottom-up; parameter grads
// accumulate (+=), the residual grad d is updated in place (d_in = d_out + path).
// Sizes are this rank's (BlockShape: its heads under tensor parallelism): the
// QKV GEMM is column-parallel (its input grad all-reduced in backward), the O
// projection row-parallel (its output all-reduced in forward).
#pragma once

#include "anvil/kernels/attention.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/ops.h"
#include "anvil/model/shard.h"

namespace anvil::model {

template <typename A>
struct AttentionWeights {
  const float* norm = nullptr;  // [C]
  const A* wqkv = nullptr;      // [C, QKV]  this rank's columns: q [NH*HD], k [NKV*HD], v [NKV*HD]
  const A* wo = nullptr;        // [NH*HD, C] this rank's rows
};

struct AttentionGrads {
  float* norm = nullptr;  // [C]
  float* wqkv = nullptr;  // [C, QKV]
  float* wo = nullptr;    // [NH*HD, C]
};

// What backward reads (the block input x is kept by the caller: the residual
// stream). NH, NKV, QKV: this rank's (BlockShape).
template <typename A>
struct AttentionSaved {
  float* rstd = nullptr;  // [N]
  A* xn = nullptr;        // [N, C]     normed input (QKV GEMM input)
  A* qkv = nullptr;       // [N, QKV]   q and k already rotated
  A* out = nullptr;       // [N, NH*HD] attention output (O GEMM input)
  float* lse = nullptr;   // [NH, N]
};

// saved.{rstd, xn, qkv} from x [N, C] (rows at tok.positions). Also decode's first half.
template <typename A>
void AttentionQkvForward(const BlockShape& s, const AttentionWeights<A>& w, const float* x,
                         const AttentionSaved<A>& saved, const TokenLayout& tok,
                         const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx);

// y = x + out · wo (low_precision: FP8, integer or packed linear layers, or null). Also
// decode's second half.
template <typename A>
void AttentionOutForward(const BlockShape& s, const AttentionWeights<A>& w, int64_t n,
                         const float* x, const A* out, float* y, const kernels::KernelCtx& ctx,
                         const LowPrecisionLinear* low_precision = nullptr);

// The whole block; y may be null (recompute: fill `saved` only).
template <typename A>
void AttentionBlockForward(const BlockShape& s, const AttentionWeights<A>& w, const float* x,
                           float* y, const AttentionSaved<A>& saved, const TokenLayout& tok,
                           const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx);

// d [N, C]: in, the grad of y; out, the grad of x (residual + attention path).
template <typename A>
void AttentionBlockBackward(const BlockShape& s, const AttentionWeights<A>& w, const float* x,
                            const AttentionSaved<A>& saved, float* d, const AttentionGrads& grads,
                            const TokenLayout& tok, const BlockScratch<A>& scratch,
                            const kernels::KernelCtx& ctx);

// The kernels' dims for this rank's heads (causal, scale 1/sqrt(HD)).
kernels::AttentionDims AttentionDimsOf(const BlockShape& s);
// The whole model's (one rank): what sizes the kernel context's scratch.
inline kernels::AttentionDims AttentionDimsOf(const ModelConfig& cfg) {
  return AttentionDimsOf(BlockShape::Of(cfg, {}));
}

}  // namespace anvil::model
