// Head: x -> final RMSNorm -> logits = xn · lm_headᵀ (lm_head [V, C], shared
// with the embedding when tied) -> cross-entropy. Backward writes the grad of
// x (=, it starts the residual stream's grad) and accumulates parameter grads.
#pragma once

#include <cstdint>

#include "anvil/kernels/ctx.h"
#include "anvil/kernels/xent.h"
#include "anvil/model/config.h"
#include "anvil/model/ops.h"

namespace anvil::model {

inline constexpr int32_t kIgnoreIndex = -1;  // a target that takes no loss

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
  float* logits = nullptr;  // [N, V]; backward turns it into dlogits in place
  float* loss = nullptr;    // [N]
  float* lse = nullptr;     // [N]
  A* dlogits_act = nullptr; // [N, V] (bf16 only)
};

// Final norm and logits (inference and tests): saved.{rstd, xn, logits}.
template <typename A>
void HeadLogits(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n, const float* x,
                const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                const kernels::KernelCtx& ctx);

// Logits and the cross-entropy of `targets` [N] (kIgnoreIndex skips a row).
template <typename A>
kernels::CrossEntropyStats HeadForward(const ModelConfig& cfg, const HeadWeights<A>& w,
                                       int64_t n, const float* x, const int32_t* targets,
                                       const HeadSaved<A>& saved, const BlockScratch<A>& scratch,
                                       const kernels::KernelCtx& ctx);

// Gradient of loss_scale * sum of row losses: dx [N, C] (=), grads (+=).
// Destroys saved.logits (it becomes dlogits).
template <typename A>
void HeadBackward(const ModelConfig& cfg, const HeadWeights<A>& w, int64_t n, const float* x,
                  const int32_t* targets, float loss_scale, const HeadSaved<A>& saved, float* dx,
                  const HeadGrads& grads, const BlockScratch<A>& scratch,
                  const kernels::KernelCtx& ctx);

}  // namespace anvil::model
