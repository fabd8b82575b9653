// MLP block forward/backward (see mlp_block.h).
#include "anvil/model/mlp_block.h"

#include "anvil/kernels/act.h"
#include "anvil/kernels/norm.h"
#include "anvil/profile/trace.h"

namespace anvil::model {

template <typename A>
void MlpBlockForward(const BlockShape& s, const MlpWeights<A>& w, int64_t n, const float* x,
                     float* y, const MlpSaved<A>& saved, const BlockScratch<A>& scratch,
                     const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("mlp_block_fwd");
  const int64_t c = s.dim, f = s.ffn;
  NormForward(ctx, n, c, x, w.norm, static_cast<float>(s.norm_eps), saved.xn, saved.rstd,
              scratch.norm_f32);
  LinearForward(ctx, n, c, 2 * f, saved.xn, w.w_gate_up, saved.gate_up, /*accumulate=*/false,
                scratch.Linear(kGateUpSite));
  kernels::SwiGluForward(ctx, n, f, saved.gate_up, saved.h);
  if (y == nullptr) return;
  RowParallelResidual(ctx, s.shard, n, f, c, x, saved.h, w.w_down, y, scratch.Linear(kDownSite));
}

template <typename A>
void MlpRecomputeH(const BlockShape& s, int64_t n, const MlpSaved<A>& saved,
                   const kernels::KernelCtx& ctx) {
  kernels::SwiGluForward(ctx, n, s.ffn, saved.gate_up, saved.h);
}

template <typename A>
void MlpBlockBackward(const BlockShape& s, const MlpWeights<A>& w, int64_t n, const float* x,
                      const MlpSaved<A>& saved, float* d, const MlpGrads& grads,
                      const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("mlp_block_bwd");
  const int64_t c = s.dim, f = s.ffn;
  // Down projection: y = x + h · w_down (row-parallel: d is whole on every rank).
  const A* dy = AsAct(ctx, d, scratch.dy_act, n * c);
  LinearBackwardWeight(ctx, n, f, c, saved.h, dy, grads.w_down, scratch.Linear(kDownSite));
  LinearBackwardData(ctx, n, f, c, dy, w.w_down, scratch.dh, scratch.Linear(kDownSite));
  // SwiGLU, then the gate/up projection (column-parallel: the norm output's
  // grad summed over the ranks).
  kernels::SwiGluBackward(ctx, n, f, saved.gate_up, scratch.dh, scratch.dgate_up);
  LinearBackwardWeight(ctx, n, c, 2 * f, saved.xn, scratch.dgate_up, grads.w_gate_up,
                       scratch.Linear(kGateUpSite));
  LinearBackwardData(ctx, n, c, 2 * f, scratch.dgate_up, w.w_gate_up, scratch.dxn,
                     scratch.Linear(kGateUpSite));
  s.shard.AllReduce(scratch.dxn, n * c);
  // RMSNorm, then the residual: d_x = d_y + d_norm.
  kernels::RmsNormBackward(ctx, n, c, x, w.norm, saved.rstd, scratch.dxn, scratch.dxn, grads.norm);
  AddInPlace(ctx, d, scratch.dxn, n * c);
}

#define ANVIL_INSTANTIATE(A)                                                                     \
  template void MlpBlockForward(const BlockShape&, const MlpWeights<A>&, int64_t, const float*,  \
                                float*, const MlpSaved<A>&, const BlockScratch<A>&,              \
                                const kernels::KernelCtx&);                                      \
  template void MlpRecomputeH(const BlockShape&, int64_t, const MlpSaved<A>&,                    \
                              const kernels::KernelCtx&);                                        \
  template void MlpBlockBackward(const BlockShape&, const MlpWeights<A>&, int64_t, const float*, \
                                 const MlpSaved<A>&, float*, const MlpGrads&,                    \
                                 const BlockScratch<A>&, const kernels::KernelCtx&);
ANVIL_INSTANTIATE(float)
ANVIL_INSTANTIATE(BF16)
#undef ANVIL_INSTANTIATE

}  // namespace anvil::model
