// Embedding block: x[N, C] = embed[tokens] (f32: the residual stream starts in
// f32 in both precisions); backward scatter-adds the residual grad (+=).
#pragma once

#include <cstdint>

#include "anvil/kernels/ctx.h"
#include "anvil/kernels/embedding.h"
#include "anvil/model/config.h"

namespace anvil::model {

inline void EmbeddingBlockForward(const ModelConfig& cfg, const float* embed /*[V, C]*/,
                                  int64_t n, const int32_t* tokens, float* x /*[N, C]*/,
                                  const kernels::KernelCtx& ctx) {
  kernels::EmbeddingForward(ctx, n, cfg.vocab_size, cfg.dim, embed, tokens, x);
}

inline void EmbeddingBlockBackward(const ModelConfig& cfg, int64_t n, const int32_t* tokens,
                                   const float* dx /*[N, C]*/, float* dembed /*[V, C]*/,
                                   const kernels::KernelCtx& ctx) {
  kernels::EmbeddingBackward(ctx, n, cfg.vocab_size, cfg.dim, tokens, dx, dembed);
}

}  // namespace anvil::model
