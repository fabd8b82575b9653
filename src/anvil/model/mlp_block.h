// MLP block: x -> RMSNorm -> gate_up GEMM -> SwiGLU -> down GEMM -> y = x + that.
// Backward mirrors it bottom-up; parameter grads accumulate (+=), the residual
// grad d is updated in place (d_in = d_out + path). Sizes are this rank's
// (BlockShape: F is its share of the FFN columns under tensor parallelism):
// gate_up is column-parallel, down row-parallel.
#pragma once

#include "anvil/kernels/ctx.h"
#include "anvil/model/ops.h"
#include "anvil/model/shard.h"

namespace anvil::model {

template <typename A>
struct MlpWeights {
  const float* norm = nullptr;   // [C]
  const A* w_gate_up = nullptr;  // [C, 2F]  this rank's gate columns first, then its up columns
  const A* w_down = nullptr;     // [F, C]   this rank's rows
};

struct MlpGrads {
  float* norm = nullptr;       // [C]
  float* w_gate_up = nullptr;  // [C, 2F]
  float* w_down = nullptr;     // [F, C]
};

// What backward reads (the block input x is kept by the caller). `h` is
// SwiGLU's output: under selective recompute it is rebuilt from gate_up.
template <typename A>
struct MlpSaved {
  float* rstd = nullptr;  // [N]
  A* xn = nullptr;        // [N, C]   gate_up GEMM input
  A* gate_up = nullptr;   // [N, 2F]
  A* h = nullptr;         // [N, F]   down GEMM input
};

// y may be null (recompute: fill `saved` only).
template <typename A>
void MlpBlockForward(const BlockShape& s, const MlpWeights<A>& w, int64_t n, const float* x,
                     float* y, const MlpSaved<A>& saved, const BlockScratch<A>& scratch,
                     const kernels::KernelCtx& ctx);

// saved.h = SwiGLU(saved.gate_up): the selective-recompute step.
template <typename A>
void MlpRecomputeH(const BlockShape& s, int64_t n, const MlpSaved<A>& saved,
                   const kernels::KernelCtx& ctx);

// d [N, C]: in, the grad of y; out, the grad of x.
template <typename A>
void MlpBlockBackward(const BlockShape& s, const MlpWeights<A>& w, int64_t n, const float* x,
                      const MlpSaved<A>& saved, float* d, const MlpGrads& grads,
                      const BlockScratch<A>& scratch, const kernels::KernelCtx& ctx);

}  // namespace anvil::model
