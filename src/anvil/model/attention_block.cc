// Attention block forward/backward (see attention_block.h).
#include "anvil/model/attention_block.h"

#include "anvil/kernels/attention.h"
#include "anvil/kernels/norm.h"
#include "anvil/kernels/rope.h"
#include "anvil/profile/trace.h"

namespace anvil::model {

kernels::AttentionDims AttentionDimsOf(const BlockShape& s) {
  return {.num_heads = static_cast<int>(s.heads),
          .num_kv_heads = static_cast<int>(s.kv_heads),
          .head_dim = static_cast<int>(s.head_dim),
          .mask = kernels::AttentionMask::kCausal};
}

template <typename A>
void AttentionQkvForward(const BlockShape& s, const AttentionWeights<A>& w, const float* x,
                         const AttentionSaved<A>& saved, const TokenLayout& tok,
                         const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx) {
  const int64_t n = tok.n, c = s.dim, qkv = s.qkv();
  NormForward(ctx, n, c, x, w.norm, static_cast<float>(s.norm_eps), saved.xn, saved.rstd,
              scratch.norm_f32);
  LinearForward(ctx, n, c, qkv, saved.xn, w.wqkv, saved.qkv, /*accumulate=*/false,
                scratch.Linear(kQkvSite));
  kernels::RopeForward(ctx, tok.rope, n, s.heads, qkv, tok.positions, 0, saved.qkv);
  kernels::RopeForward(ctx, tok.rope, n, s.kv_heads, qkv, tok.positions, 0, saved.qkv + s.q());
}

template <typename A>
void AttentionOutForward(const BlockShape& s, const AttentionWeights<A>& w, int64_t n,
                         const float* x, const A* out, float* y, const kernels::KernelCtx& ctx,
                         const LowPrecisionLinear* low_precision) {
  RowParallelResidual(ctx, s.shard, n, s.q(), s.dim, x, out, w.wo, y, low_precision);
}

template <typename A>
void AttentionBlockForward(const BlockShape& s, const AttentionWeights<A>& w, const float* x,
                           float* y, const AttentionSaved<A>& saved, const TokenLayout& tok,
                           const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("attention_block_fwd");
  const int64_t qkv = s.qkv();
  AttentionQkvForward(s, w, x, saved, tok, scratch, ctx);
  constexpr DType dt = kActDType<A>;
  kernels::AttentionForward(ctx, AttentionDimsOf(s), tok.cu_seqlens, {saved.qkv, dt, qkv},
                            {saved.qkv + s.q(), dt, qkv}, {saved.qkv + s.q() + s.kv(), dt, qkv},
                            {saved.out, dt, 0}, saved.lse);
  if (y != nullptr) {
    AttentionOutForward(s, w, tok.n, x, saved.out, y, ctx, scratch.Linear(kOutSite));
  }
}

template <typename A>
void AttentionBlockBackward(const BlockShape& s, const AttentionWeights<A>& w, const float* x,
                            const AttentionSaved<A>& saved, float* d, const AttentionGrads& grads,
                            const TokenLayout& tok, const BlockScratch<A>& scratch,
                            const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("attention_block_bwd");
  const int64_t n = tok.n, c = s.dim, qkv = s.qkv(), attn = s.q();
  constexpr DType dt = kActDType<A>;
  // O projection: y = x + out · wo (row-parallel: d is whole on every rank).
  const A* dy = AsAct(ctx, d, scratch.dy_act, n * c);
  LinearBackwardWeight(ctx, n, attn, c, saved.out, dy, grads.wo, scratch.Linear(kOutSite));
  LinearBackwardData(ctx, n, attn, c, dy, w.wo, scratch.d_attn_out, scratch.Linear(kOutSite));
  // FlashAttention (recomputes the probabilities from q, k and lse).
  float* dq = scratch.dqkv;
  float* dk = dq + attn;
  float* dv = dk + s.kv();
  kernels::AttentionBackward(ctx, AttentionDimsOf(s), tok.cu_seqlens, {saved.qkv, dt, qkv},
                             {saved.qkv + attn, dt, qkv}, {saved.qkv + attn + s.kv(), dt, qkv},
                             {saved.out, dt, 0}, {scratch.d_attn_out, DType::kF32, 0}, saved.lse,
                             {dq, qkv}, {dk, qkv}, {dv, qkv});
  kernels::RopeBackward(ctx, tok.rope, n, s.heads, qkv, tok.positions, 0, dq);
  kernels::RopeBackward(ctx, tok.rope, n, s.kv_heads, qkv, tok.positions, 0, dk);
  // QKV projection (column-parallel: each rank's heads add to the norm
  // output's grad, summed over the ranks before the norm's backward).
  const A* dqkv = AsAct(ctx, scratch.dqkv, scratch.dqkv_act, n * qkv);
  LinearBackwardWeight(ctx, n, c, qkv, saved.xn, dqkv, grads.wqkv, scratch.Linear(kQkvSite));
  LinearBackwardData(ctx, n, c, qkv, dqkv, w.wqkv, scratch.dxn, scratch.Linear(kQkvSite));
  s.shard.AllReduce(scratch.dxn, n * c);
  // RMSNorm, then the residual: d_x = d_y + d_norm.
  kernels::RmsNormBackward(ctx, n, c, x, w.norm, saved.rstd, scratch.dxn, scratch.dxn, grads.norm);
  AddInPlace(ctx, d, scratch.dxn, n * c);
}

#define ANVIL_INSTANTIATE(A)                                                                       \
  template void AttentionQkvForward(const BlockShape&, const AttentionWeights<A>&, const float*,   \
                                    const AttentionSaved<A>&, const TokenLayout&,                  \
                                    const BlockScratch<A>&, const kernels::KernelCtx&);            \
  template void AttentionOutForward(const BlockShape&, const AttentionWeights<A>&, int64_t,        \
                                    const float*, const A*, float*, const kernels::KernelCtx&,     \
                                    const LowPrecisionLinear*);                                             \
  template void AttentionBlockForward(const BlockShape&, const AttentionWeights<A>&, const float*, \
                                      float*, const AttentionSaved<A>&, const TokenLayout&,        \
                                      const BlockScratch<A>&, const kernels::KernelCtx&);          \
  template void AttentionBlockBackward(const BlockShape&, const AttentionWeights<A>&,              \
                                       const float*, const AttentionSaved<A>&, float*,             \
                                       const AttentionGrads&, const TokenLayout&,                  \
                                       const BlockScratch<A>&, const kernels::KernelCtx&);
ANVIL_INSTANTIATE(float)
ANVIL_INSTANTIATE(BF16)
#undef ANVIL_INSTANTIATE

}  // namespace anvil::model
