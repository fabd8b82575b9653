// Small model-side helpers over the kernels, templated on the activation type
// A of GEMM/attention inputs (float for f32 precision, BF16 for bf16): Linear
// forward/backward on [in, out] weights, f32 -> A conversion, residual adds.
// All are row-local or elementwise, so batch invariance carries over.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/norm.h"
#include "anvil/kernels/rope.h"
#include "anvil/model/low_precision_linear.h"
#include "anvil/model/shard.h"

namespace anvil::model {

template <typename A>
inline constexpr DType kActDType = std::is_same_v<A, float> ? DType::kF32 : DType::kBF16;

// Elementwise work over [0, n) in fixed chunks spread over the pool.
template <typename Fn>
void ForChunks(const kernels::KernelCtx& ctx, int64_t n, Fn&& fn) {
  constexpr int64_t kChunk = 1 << 13;
  ctx.pool().ParallelFor((n + kChunk - 1) / kChunk, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) fn(i * kChunk, std::min(n, (i + 1) * kChunk));
  });
}

// The token rows of a step: N rows in sequences given by cu_seqlens (FA2
// style, over the flattened rows), row t at RoPE position positions[t].
struct TokenLayout {
  int64_t n = 0;                        // N
  std::span<const int32_t> cu_seqlens;  // [num_seqs + 1]
  const int32_t* positions = nullptr;   // [N]
  kernels::RopeTable rope;
};

// A layer's linear GEMM sites (the q|k|v, o, gate|up and down projections):
// an FP8 recipe with state per tensor (delayed scaling) keeps it per site.
enum LinearSite : int { kQkvSite, kOutSite, kGateUpSite, kDownSite, kLinearSites };

// Per-step scratch the blocks share (carved once from the activation arena;
// only one block runs at a time). Shapes for N rows.
template <typename A>
struct BlockScratch {
  float* norm_f32 = nullptr;    // [N, C]   RMSNorm output before rounding (bf16 only)
  A* dy_act = nullptr;          // [N, C]   residual grad as A (bf16 only)
  float* dxn = nullptr;         // [N, C]   grad of a norm output
  float* d_attn_out = nullptr;  // [N, NH*HD]
  float* dqkv = nullptr;        // [N, QKV]
  A* dqkv_act = nullptr;        // [N, QKV] (bf16 only)
  A* dh = nullptr;              // [N, F]
  A* dgate_up = nullptr;        // [N, 2F]
  // The layer's linear GEMMs in FP8 (the FP8 precisions) or integers
  // (quantized inference), one per site (A = float), or weights packed once
  // for decoding (f32, or bf16 for A = BF16); null: A's Gemm. The Linear*
  // helpers below take them.
  std::array<const LowPrecisionLinear*, kLinearSites> linear = {};
  const LowPrecisionLinear* Linear(LinearSite site) const { return linear[site]; }
  void SetLinear(const LowPrecisionLinear* lp) { linear.fill(lp); }
};

// dst[0, n) = A(src): an RNE rounding for bf16, a copy for f32.
template <typename A>
void ConvertTo(const kernels::KernelCtx& ctx, const float* src, A* dst, int64_t n) {
  ForChunks(ctx, n, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<A, float>) {
      std::memcpy(dst + b, src + b, (e - b) * sizeof(float));
    } else {
      F32ToBF16(ctx.isa(), std::span<const float>(src + b, e - b),
                std::span<uint16_t>(reinterpret_cast<uint16_t*>(dst) + b, e - b));
    }
  });
}

// `src` as A: itself for f32, else converted into `scratch`.
template <typename A>
const A* AsAct(const kernels::KernelCtx& ctx, const float* src, A* scratch, int64_t n) {
  if constexpr (std::is_same_v<A, float>) {
    return src;
  } else {
    ConvertTo(ctx, src, scratch, n);
    return scratch;
  }
}

inline void Copy(const kernels::KernelCtx& ctx, const float* src, float* dst, int64_t n) {
  ForChunks(ctx, n, [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, (e - b) * 4); });
}

// acc[i] += x[i] (f32).
inline void AddInPlace(const kernels::KernelCtx& ctx, float* acc, const float* x, int64_t n) {
  ForChunks(ctx, n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) acc[i] += x[i];
  });
}

// RMSNorm of f32 rows into A: direct for f32; for bf16 through the f32
// `scratch` [rows, dim] and one RNE rounding (the fused kernel's bits).
template <typename A>
void NormForward(const kernels::KernelCtx& ctx, int64_t rows, int64_t dim, const float* x,
                 const float* weight, float eps, A* y, float* rstd, float* scratch) {
  if constexpr (std::is_same_v<A, float>) {
    kernels::RmsNormForward(ctx, rows, dim, x, weight, eps, y, rstd);
  } else {
    kernels::RmsNormForward(ctx, rows, dim, x, weight, eps, scratch, rstd);
    ConvertTo(ctx, scratch, y, rows * dim);
  }
}

// The linear layers' three GEMMs. With `lp` (A = float) they run in its
// format: FP8 (fp8_linear.h) or integers (int_linear.h, forward only); a
// bf16 forward with weights packed once where `lp` takes bf16 (PackedLinear).
// y[n, out] (+)= x[n, in] · w[in, out]   (NN).
template <typename A, typename Y>
void LinearForward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const A* x,
                   const A* w, Y* y, bool accumulate, const LowPrecisionLinear* lp = nullptr) {
  if constexpr (std::is_same_v<A, float> && std::is_same_v<Y, float>) {
    if (lp != nullptr) return lp->Forward(ctx, n, in, out, x, w, y, accumulate);
  }
  if constexpr (std::is_same_v<A, BF16>) {
    if (lp != nullptr && lp->ForwardBf16(ctx, n, in, out, x, w, y, accumulate)) return;
  }
  kernels::Gemm(ctx, {.m = n, .n = out, .k = in, .accumulate = accumulate}, x, w, y);
}

// dx[n, in] = dy[n, out] · w[in, out]ᵀ   (NT).
template <typename A, typename Y>
void LinearBackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                        const A* dy, const A* w, Y* dx, const LowPrecisionLinear* lp = nullptr) {
  if constexpr (std::is_same_v<A, float> && std::is_same_v<Y, float>) {
    if (lp != nullptr) return lp->BackwardData(ctx, n, in, out, dy, w, dx);
  }
  kernels::Gemm(ctx, {.m = n, .n = in, .k = out, .trans_b = kernels::Trans::kT}, dy, w, dx);
}

// dw[in, out] += x[n, in]ᵀ · dy[n, out]   (TN, accumulating: parameter grads +=).
template <typename A>
void LinearBackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                          const A* x, const A* dy, float* dw, const LowPrecisionLinear* lp = nullptr) {
  if constexpr (std::is_same_v<A, float>) {
    if (lp != nullptr) return lp->BackwardWeight(ctx, n, in, out, x, dy, dw);
  }
  kernels::Gemm(ctx, {.m = in, .n = out, .k = n, .trans_a = kernels::Trans::kT, .accumulate = true},
                x, dy, dw);
}

// y[n, C] = x + in[n, in_dim] · w[in_dim, C] where `in` and `w` are this
// rank's slices (columns of in, rows of w) of a row-parallel GEMM: rank 0
// accumulates its partial product onto a copy of x, the others start from
// zero, and the rank-order all-reduce forms ((x + p0) + p1) + ..., so x enters
// the sum once. With one rank: y = x, y += in · w, as without parallelism.
template <typename A>
void RowParallelResidual(const kernels::KernelCtx& ctx, const ShardInfo& shard, int64_t n,
                         int64_t in_dim, int64_t c, const float* x, const A* in, const A* w,
                         float* y, const LowPrecisionLinear* lp = nullptr) {
  const bool first = shard.rank == 0;
  if (first) Copy(ctx, x, y, n * c);
  LinearForward(ctx, n, in_dim, c, in, w, y, /*accumulate=*/first, lp);
  shard.AllReduce(y, n * c);
}

}  // namespace anvil::model
