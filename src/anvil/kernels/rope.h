// Rotary position embedding, Hugging Face Llama convention ("rotate half"):
// element i of a head pairs with element i + HD/2 and turns by the angle
// pos * inv_freq[i], inv_freq[i] = theta^(-2i/HD), i < HD/2:
//   y[i]        = x[i] cos - x[i + HD/2] sin
//   y[i + HD/2] = x[i + HD/2] cos + x[i] sin
// The cos/sin come from a table built once (RopeBuildTable); the kernels only
// read it, in place on a [tokens, heads, HD] buffer with a token stride, so
// they run on the Q and K parts of a fused QKV output. A token's result
// depends only on its values and its position: decode (one token at position
// offset + 0) gives the same bits as training at that position.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

// A read-only view of a built table: row p (p < max_positions) holds HD
// floats, cos(p * inv_freq[i]) for i < HD/2, then sin(p * inv_freq[i]).
struct RopeTable {
  const float* data = nullptr;
  int64_t max_positions = 0;
  int64_t head_dim = 0;  // HD, even
};

// Floats a table for these sizes needs (max_positions * head_dim).
int64_t RopeTableFloats(int64_t max_positions, int64_t head_dim);

// Fills `storage` (RopeTableFloats floats) and returns the view. Angles are
// computed in double and rounded once: inv_freq[i] = pow(theta, -2i / HD),
// angle = double(p) * inv_freq[i], then float(cos(angle)), float(sin(angle)).
// (Hugging Face computes inv_freq and the angle in f32; at position 4096 its
// angle is off by up to ~2.4e-4 rad, ours by less than 1e-12.)
RopeTable RopeBuildTable(const KernelCtx& ctx, int64_t max_positions, int64_t head_dim,
                         double theta, float* storage);
// The same with the caller's inv_freq[HD/2] (e.g. Llama 3 frequency scaling).
RopeTable RopeBuildTableFromInvFreq(const KernelCtx& ctx, int64_t max_positions, int64_t head_dim,
                                    const double* inv_freq, float* storage);

// Rotates x in place. Token t (t < tokens) sits at x + t * token_stride, its
// heads at consecutive offsets of HD; its position is
//   (positions != nullptr ? positions[t] : t) + position_offset,
// which must lie in [0, table.max_positions) (CHECKed, naming the token).
// Per pair: y1 = fma(-x2, sin, x1 * cos), y2 = fma(x1, sin, x2 * cos) in f32;
// bf16 x is widened exactly and the result rounded once (RNE).
void RopeForward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                 int64_t token_stride, const int32_t* positions, int64_t position_offset, float* x);
void RopeForward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                 int64_t token_stride, const int32_t* positions, int64_t position_offset, BF16* x);

// The adjoint (rotation by the negative angle), in place on the gradient:
//   d1 = fma(g2, sin, g1 * cos),  d2 = fma(-g1, sin, g2 * cos).
void RopeBackward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                  int64_t token_stride, const int32_t* positions, int64_t position_offset,
                  float* dx);
void RopeBackward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                  int64_t token_stride, const int32_t* positions, int64_t position_offset,
                  BF16* dx);

}  // namespace anvil::kernels
