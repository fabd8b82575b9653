// SwiGLU on the fused gate/up projection. Layout: gate_up is [tokens, 2F],
// row t holding gate[t, 0..F) in columns [0, F) and up[t, 0..F) in [F, 2F);
// out is [tokens, F]; dgate_up has gate_up's layout. Elementwise, in f32:
//   e = exp(-g), sig = 1 / (1 + e), silu = g * sig, out = silu * up
//   dup   = dout * silu
//   dgate = ((dout * up) * sig) * fma(g, min(e * sig, 1), 1)
// (e * sig is 1 - sig without cancellation; the min only turns the inf * 0 of
// g < -88.7 into its limit 1).
// exp is simd.h's Exp (< 1 ulp, the same bits on every tier). bf16 inputs are
// widened exactly and outputs rounded once (RNE). Each element depends only on
// its own inputs, so any thread split gives the same bits (batch invariant).
// Gradient rule: dgate_up is overwritten.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

void SwiGluForward(const KernelCtx& ctx, int64_t tokens, int64_t f, const float* gate_up,
                   float* out);
void SwiGluForward(const KernelCtx& ctx, int64_t tokens, int64_t f, const BF16* gate_up, BF16* out);

// `dgate_up` may alias `gate_up` (same dtype): each pair is read before written.
void SwiGluBackward(const KernelCtx& ctx, int64_t tokens, int64_t f, const float* gate_up,
                    const float* dout, float* dgate_up);
void SwiGluBackward(const KernelCtx& ctx, int64_t tokens, int64_t f, const BF16* gate_up,
                    const BF16* dout, BF16* dgate_up);

}  // namespace anvil::kernels
