// Head: x -> final RMSNorm -> logits = xn · lm_headᵀ (lm_head [V, C], shared
// with the embedding when tied) -> cross-entropy. Backward writes the grad of
// x (=, it starts the residual stream's grad) and accumulates parameter grads.
//
// The [N, V] logits are never held whole: training and evaluation walk the
// rows in chunks of HeadChunkRows, and training runs each chunk's backward
// right after its loss (the loss scale is known up front), so the head's
// memory is [chunk, V] whatever N. The chunk is a multiple of every tier's
// GEMM K block, so the lm_head gradient (a GEMM whose K is the token rows)
// sums the same K blocks in the same order as one unchunked call: chunked and
// unchunked give bitwise the same loss and gradients (model_test proves it).
#pragma once

#include <cstdint>

#include "anvil/kernels/ctx.h"
#include "anvil/kernels/xent.h"
#include "anvil/model/config.h"
#include "anvil/model/ops.h"

namespace anvil::model {

inline constexpr int32_t kIgnoreIndex = -1;  // a target that takes no loss

// Rows per head chunk: 2048, a multiple of every GEMM K block (256 on AVX2 and
// scalar, 1024 and 2048 on AVX-512); `requested` 0 takes it, and any other
// value must be such a multiple (CHECKed against the tier at run time).
inline constexpr int64_t kHeadChunkRows = 2048;

template <typename A>
struct HeadWeights {
  const float* norm = nullptr;  // [C]
  const A* lm_head = nullptr;   // [V, C]
};

struct HeadGrads {
  float* norm = nullptr;     // [C]
  float* lm_head = nullptr;  // [V, C] (the embedding's grad when tied)
};

template <typename A>
struct HeadSaved {
  float* rstd = nullptr;    // [N]
  A* xn = nullptr;          // [N, C]
  float* logits = nullptr;  // [R, V], R = one chunk's rows (HeadLogits: the caller's [N, V])
  float* loss = nullptr;    // [N]
  float* lse = nullptr;     // [N]
  A* dlogits_act = nullptr; // [R, V] (bf16 only)
};

// An FP8 model's LM head in bf16 (Fp8Recipe::high_precision_bf16): the bf16
// head's buffers beside the f32 blocks'.
struct Bf16Head {
  HeadSaved<BF16> saved;
  BlockScratch<BF16> scratch;  // norm_f32 and dxn, what the head uses
};

// Final norm and logits of all n rows into saved.logits (inference, decode);
// the logits GEMM through `linear` where it runs the head (f32 models, and
// bf16 ones through HeadLogitsBf16).
template <typename A>
void HeadLogits(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n, const float* x,
                const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                const kernels::KernelCtx& ctx, const LowPrecisionLinear* linear = nullptr);

// The cross-entropy of `targets` [N] (kIgnoreIndex skips a row), chunk by
// chunk (evaluation). Stats sum the rows in order, as one kernel call would.
template <typename A>
kernels::CrossEntropyStats HeadLoss(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n,
                                    int64_t chunk_rows, const float* x, const int32_t* targets,
                                    const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                                    const kernels::KernelCtx& ctx);

// Training: the loss and, chunk by chunk, the gradient of loss_scale * sum of
// row losses (each times loss_weights[r] when given: [N] or null): dx [N, C]
// (=), grads (+=).
template <typename A>
kernels::CrossEntropyStats HeadForwardBackward(const ModelConfig& cfg, const HeadWeights<A>& w,
                                               int64_t n, int64_t chunk_rows, const float* x,
                                               const int32_t* targets, float loss_scale,
                                               const float* loss_weights,
                                               const HeadSaved<A>& saved, float* dx,
                                               const HeadGrads& grads,
                                               const BlockScratch<A>& scratch,
                                               const kernels::KernelCtx& ctx);

}  // namespace anvil::model
