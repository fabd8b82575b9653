// Attention block: x -> RMSNorm -> QKV GEMM -> RoPE(q, k) -> FlashAttention ->
// O projection -> y = x + that. Backward mirrors it bottom-up; parameter grads
// accumulate (+=), the residual grad d is updated in place (d_in = d_out + path).
#pragma once

#include "anvil/kernels/attention.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/config.h"
#include "anvil/model/ops.h"

namespace anvil::model {

template <typename A>
struct AttentionWeights {
  const float* norm = nullptr;  // [C]
  const A* wqkv = nullptr;      // [C, QKV]
  const A* wo = nullptr;        // [NH*HD, C]
};

struct AttentionGrads {
  float* norm = nullptr;  // [C]
  float* wqkv = nullptr;  // [C, QKV]
  float* wo = nullptr;    // [NH*HD, C]
};

// What backward reads (the block input x is kept by the caller: the residual stream).
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
void AttentionQkvForward(const ModelConfig& cfg, const AttentionWeights<A>& w, const float* x,
                         const AttentionSaved<A>& saved, const TokenLayout& tok,
                         const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx);

// y = x + out · wo. Also decode's second half.
template <typename A>
void AttentionOutForward(const ModelConfig& cfg, const AttentionWeights<A>& w, int64_t n,
                         const float* x, const A* out, float* y, const kernels::KernelCtx& ctx);

// The whole block; y may be null (recompute: fill `saved` only).
template <typename A>
void AttentionBlockForward(const ModelConfig& cfg, const AttentionWeights<A>& w, const float* x,
                           float* y, const AttentionSaved<A>& saved, const TokenLayout& tok,
                           const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx);

// d [N, C]: in, the grad of y; out, the grad of x (residual + attention path).
template <typename A>
void AttentionBlockBackward(const ModelConfig& cfg, const AttentionWeights<A>& w, const float* x,
                            const AttentionSaved<A>& saved, float* d, const AttentionGrads& grads,
                            const TokenLayout& tok, const BlockScratch<A>& scratch,
                            const kernels::KernelCtx& ctx);

// The kernels' dims for this config (causal, scale 1/sqrt(HD)).
kernels::AttentionDims AttentionDimsOf(const ModelConfig& cfg);

}  // namespace anvil::model
