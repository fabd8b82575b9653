// Head forward/backward in row chunks (see head_block.h).
#include "anvil/model/head_block.h"

#include <algorithm>
#include <type_traits>

#include "anvil/core/check.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/norm.h"
#include "anvil/profile/trace.h"

namespace anvil::model {
namespace {

// The chunk's rows must end on GEMM K-block boundaries (see head_block.h).
template <typename A>
void CheckChunk(const kernels::KernelCtx& ctx, int64_t chunk_rows) {
  const int64_t kc = kernels::GemmKBlock(ctx.isa(), std::is_same_v<A, BF16>);
  CHECK(chunk_rows > 0 && chunk_rows % kc == 0)
      << "head chunk of " << chunk_rows << " rows is not a multiple of the GEMM K block " << kc;
}

// logits[rows, V] = xn[r0 .. r0 + rows) · lm_head[V, C]ᵀ  (NT).
template <typename A>
void ChunkLogits(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t r0, int64_t rows,
                 const A* xn, float* logits, const kernels::KernelCtx& ctx) {
  kernels::Gemm(ctx, {.m = rows, .n = cfg.vocab_size, .k = cfg.dim, .trans_b = kernels::Trans::kT},
                xn + r0 * cfg.dim, w.lm_head, logits);
}

// Rows [r0, r0 + rows): their logits into saved.logits, then their loss and lse.
template <typename A>
void ChunkLoss(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t r0, int64_t rows,
               const int32_t* targets, const HeadSaved<A>& saved, const kernels::KernelCtx& ctx) {
  ChunkLogits(cfg, w, r0, rows, saved.xn, saved.logits, ctx);
  kernels::CrossEntropyForward(ctx, rows, cfg.vocab_size, saved.logits, targets + r0, kIgnoreIndex,
                               /*z_loss_coef=*/0.0f, saved.loss + r0, saved.lse + r0);
}

}  // namespace

template <typename A>
void HeadLogits(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n, const float* x,
                const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                const kernels::KernelCtx& ctx, const LowPrecisionLinear* linear) {
  NormForward(ctx, n, cfg.dim, x, w.norm, static_cast<float>(cfg.norm_eps), saved.xn, saved.rstd,
              scratch.norm_f32);
  if constexpr (std::is_same_v<A, float>) {
    if (linear != nullptr && linear->HeadLogits(ctx, n, cfg.dim, cfg.vocab_size, saved.xn,
                                                w.lm_head, saved.logits)) {
      return;
    }
  } else {
    if (linear != nullptr && linear->HeadLogitsBf16(ctx, n, cfg.dim, cfg.vocab_size, saved.xn,
                                                    w.lm_head, saved.logits)) {
      return;
    }
  }
  ChunkLogits(cfg, w, 0, n, saved.xn, saved.logits, ctx);
}

template <typename A>
kernels::CrossEntropyStats HeadLoss(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n,
                                    int64_t chunk_rows, const float* x, const int32_t* targets,
                                    const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                                    const kernels::KernelCtx& ctx) {
  ANVIL_TRACE_ZONE("head_fwd");
  NormForward(ctx, n, cfg.dim, x, w.norm, static_cast<float>(cfg.norm_eps), saved.xn, saved.rstd,
              scratch.norm_f32);
  for (int64_t r0 = 0; r0 < n; r0 += chunk_rows) {
    ChunkLoss(cfg, w, r0, std::min(chunk_rows, n - r0), targets, saved, ctx);
  }
  return kernels::CrossEntropyRowStats(n, targets, kIgnoreIndex, 0.0f, saved.loss, saved.lse);
}

template <typename A>
kernels::CrossEntropyStats HeadForwardBackward(const ModelConfig& cfg, const HeadWeights<A>& w,
                                               int64_t n, int64_t chunk_rows, const float* x,
                                               const int32_t* targets, float loss_scale,
                                               const float* loss_weights,
                                               const HeadSaved<A>& saved, float* dx,
                                               const HeadGrads& grads,
                                               const BlockScratch<A>& scratch,
                                               const kernels::KernelCtx& ctx) {
  const int64_t c = cfg.dim, v = cfg.vocab_size;
  if (chunk_rows < n) CheckChunk<A>(ctx, chunk_rows);
  {
    ANVIL_TRACE_ZONE("head_fwd");
    NormForward(ctx, n, c, x, w.norm, static_cast<float>(cfg.norm_eps), saved.xn, saved.rstd,
                scratch.norm_f32);
  }
  for (int64_t r0 = 0; r0 < n; r0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, n - r0);
    {
      ANVIL_TRACE_ZONE("head_fwd");
      ChunkLoss(cfg, w, r0, rows, targets, saved, ctx);
    }
    ANVIL_TRACE_ZONE("head_bwd");
    float* dlogits = saved.logits;  // in place
    kernels::CrossEntropyBackward(ctx, rows, v, saved.logits, targets + r0, kIgnoreIndex, 0.0f,
                                  saved.lse + r0, loss_weights ? loss_weights + r0 : nullptr,
                                  loss_scale, dlogits);
    const A* dl = AsAct(ctx, dlogits, saved.dlogits_act, rows * v);
    // lm_head[V, C] += dlogits[rows, V]ᵀ · xn[rows, C]  (TN; K = these rows).
    LinearBackwardWeight(ctx, rows, v, c, dl, saved.xn + r0 * c, grads.lm_head);
    // dxn[rows, C] = dlogits[rows, V] · lm_head[V, C]  (NN).
    LinearForward(ctx, rows, v, c, dl, w.lm_head, scratch.dxn + r0 * c, /*accumulate=*/false);
  }
  {
    ANVIL_TRACE_ZONE("head_bwd");
    kernels::RmsNormBackward(ctx, n, c, x, w.norm, saved.rstd, scratch.dxn, dx, grads.norm);
  }
  return kernels::CrossEntropyRowStats(n, targets, kIgnoreIndex, 0.0f, saved.loss, saved.lse);
}

#define ANVIL_INSTANTIATE(A)                                                                    \
  template void HeadLogits(const ModelConfig&, const HeadWeights<A>&, int64_t, const float*,    \
                           const HeadSaved<A>&, const BlockScratch<A>&,                         \
                           const kernels::KernelCtx&, const LowPrecisionLinear*);               \
  template kernels::CrossEntropyStats HeadLoss(                                                 \
      const ModelConfig&, const HeadWeights<A>&, int64_t, int64_t, const float*, const int32_t*, \
      const HeadSaved<A>&, const BlockScratch<A>&, const kernels::KernelCtx&);                  \
  template kernels::CrossEntropyStats HeadForwardBackward(                                      \
      const ModelConfig&, const HeadWeights<A>&, int64_t, int64_t, const float*, const int32_t*, \
      float, const float*, const HeadSaved<A>&, float*, const HeadGrads&, const BlockScratch<A>&, \
      const kernels::KernelCtx&);
ANVIL_INSTANTIATE(float)
ANVIL_INSTANTIATE(BF16)
#undef ANVIL_INSTANTIATE

}  // namespace anvil::model
