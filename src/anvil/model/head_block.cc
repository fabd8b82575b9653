// Head forward/backward (see head_block.h).
#include "anvil/model/head_block.h"

#include "anvil/kernels/gemm.h"
#include "anvil/kernels/norm.h"
#include "anvil/profile/trace.h"

namespace anvil::model {

template <typename A>
void HeadLogits(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n, const float* x,
                const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                const kernels::KernelCtx& ctx) {
  const int64_t c = cfg.dim, v = cfg.vocab_size;
  NormForward(ctx, n, c, x, w.norm, static_cast<float>(cfg.norm_eps), saved.xn, saved.rstd,
              scratch.norm_f32);
  // logits[N, V] = xn[N, C] · lm_head[V, C]ᵀ  (NT).
  kernels::Gemm(ctx, {.m = n, .n = v, .k = c, .trans_b = kernels::Trans::kT}, saved.xn,
                w.lm_head, saved.logits);
}

template <typename A>
kernels::CrossEntropyStats HeadForward(const ModelConfig& cfg, const HeadWeights<A>& w,
                                       int64_t n, const float* x, const int32_t* targets,
                                       const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                                       const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("head_fwd");
  HeadLogits(cfg, w, n, x, saved, scratch, ctx);
  return kernels::CrossEntropyForward(ctx, n, cfg.vocab_size, saved.logits, targets, kIgnoreIndex,
                                      /*z_loss_coef=*/0.0f, saved.loss, saved.lse);
}

template <typename A>
void HeadBackward(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n, const float* x,
                  const int32_t* targets, float loss_scale, const HeadSaved<A>& saved, float* dx,
                  const HeadGrads& grads, const BlockScratch<A>& scratch,
                  const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("head_bwd");
  const int64_t c = cfg.dim, v = cfg.vocab_size;
  float* dlogits = saved.logits;
  kernels::CrossEntropyBackward(ctx, n, v, saved.logits, targets, kIgnoreIndex, 0.0f, saved.lse,
                                /*dloss=*/nullptr, loss_scale, dlogits);
  const A* dl = AsAct(ctx, dlogits, saved.dlogits_act, n * v);
  // lm_head[V, C] += dlogits[N, V]ᵀ · xn[N, C]  (TN).
  LinearBackwardWeight(ctx, n, v, c, dl, saved.xn, grads.lm_head);
  // dxn[N, C] = dlogits[N, V] · lm_head[V, C]  (NN).
  LinearForward(ctx, n, v, c, dl, w.lm_head, scratch.dxn, /*accumulate=*/false);
  kernels::RmsNormBackward(ctx, n, c, x, w.norm, saved.rstd, scratch.dxn, dx, grads.norm);
}

#define ANVIL_INSTANTIATE(A)                                                                   \
  template void HeadLogits(const ModelConfig&, const HeadWeights<A>&, int64_t, const float*,   \
                           const HeadSaved<A>&, const BlockScratch<A>&,                        \
                           const kernels::KernelCtx&);                                         \
  template kernels::CrossEntropyStats HeadForward(                                             \
      const ModelConfig&, const HeadWeights<A>&, int64_t, const float*, const int32_t*,        \
      const HeadSaved<A>&, const BlockScratch<A>&, const kernels::KernelCtx&);                 \
  template void HeadBackward(const ModelConfig&, const HeadWeights<A>&, int64_t, const float*, \
                             const int32_t*, float, const HeadSaved<A>&, float*,               \
                             const HeadGrads&, const BlockScratch<A>&, const kernels::KernelCtx&);
ANVIL_INSTANTIATE(float)
ANVIL_INSTANTIATE(BF16)
#undef ANVIL_INSTANTIATE

}  // namespace anvil::model
