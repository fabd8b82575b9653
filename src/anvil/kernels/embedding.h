// Token embedding: forward gathers rows of a [vocab, dim] table into
// [tokens, dim]; backward scatter-adds the output gradient into dtable (+=).
// Backward is deterministic whatever the thread count: threads own slices of
// columns (whole 64-byte lines) and each walks the tokens in order, so
// dtable[id, c] receives its additions in token order, one f32 add each.
// Token ids outside [0, vocab) are a CHECK failure naming the id and token.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

// out[t, :] = table[ids[t], :]. Same dtype: an exact copy; f32 table -> bf16
// out: rounded once (RNE), for bf16 activations from an f32 master table.
void EmbeddingForward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                      const float* table, const int32_t* ids, float* out);
void EmbeddingForward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                      const BF16* table, const int32_t* ids, BF16* out);
void EmbeddingForward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                      const float* table, const int32_t* ids, BF16* out);

// dtable[ids[t], :] += dout[t, :] for t = 0, 1, ... in order (f32 adds; bf16
// dout is widened exactly). Rows of dtable no token uses are not touched.
void EmbeddingBackward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                       const int32_t* ids, const float* dout, float* dtable);
void EmbeddingBackward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                       const int32_t* ids, const BF16* dout, float* dtable);

}  // namespace anvil::kernels
