// RoPE: the table build (double angles, rounded once), argument and position
// checks, the tier dispatch and the token partition, plus the portable tier.
#include "anvil/kernels/rope.h"

#include <cmath>
#include <type_traits>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/rope_impl.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace rope_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::rope::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace rope_internal

namespace {

const rope_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, rope_internal::ScalarKernels,
                                          rope_internal::Avx2Kernels, rope_internal::Avx512Kernels);
}

void CheckHeadDim(int64_t head_dim) {
  CHECK(head_dim > 0 && head_dim % 2 == 0)
      << "RoPE: head_dim must be positive and even, got " << head_dim;
}

template <typename T>
void Apply(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
           int64_t token_stride, const int32_t* positions, int64_t position_offset, T* x,
           bool backward) {
  ANVIL_TRACE_ZONE(backward ? "rope_bwd" : "rope_fwd");
  CHECK(table.data != nullptr) << "RoPE: the table is empty (build it with RopeBuildTable)";
  CheckHeadDim(table.head_dim);
  CHECK_GE(tokens, 0) << "RoPE: tokens must be >= 0";
  CHECK_GT(heads, 0) << "RoPE: heads must be > 0";
  CHECK_GE(token_stride, heads * table.head_dim)
      << "RoPE: token_stride must cover heads * head_dim";
  CHECK(tokens == 0 || x != nullptr) << "RoPE: x must be non-null";
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t pos = (positions != nullptr ? positions[t] : t) + position_offset;
    CHECK(pos >= 0 && pos < table.max_positions)
        << "RoPE: token " << t << " has position " << pos << ", outside the table's [0, "
        << table.max_positions << ")";
  }
  const rope_internal::Args<T> args{.table = table.data,
                                    .head_dim = table.head_dim,
                                    .heads = heads,
                                    .token_stride = token_stride,
                                    .positions = positions,
                                    .position_offset = position_offset,
                                    .x = x};
  const auto& k = KernelsFor(ctx.isa());
  const auto fn = [&] {
    if constexpr (std::is_same_v<T, BF16>)
      return backward ? k.backward_bf16 : k.forward_bf16;
    else
      return backward ? k.backward_f32 : k.forward_f32;
  }();
  rowwise_internal::ParallelFor(ctx, tokens,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
}

}  // namespace

int64_t RopeTableFloats(int64_t max_positions, int64_t head_dim) {
  CHECK_GE(max_positions, 0) << "RoPE: max_positions must be >= 0";
  CheckHeadDim(head_dim);
  return max_positions * head_dim;
}

RopeTable RopeBuildTableFromInvFreq(const KernelCtx& ctx, int64_t max_positions, int64_t head_dim,
                                    const double* inv_freq, float* storage) {
  const int64_t floats = RopeTableFloats(max_positions, head_dim);
  CHECK(floats == 0 || (storage != nullptr && inv_freq != nullptr))
      << "RopeBuildTable: storage and inv_freq must be non-null";
  const int64_t half = head_dim / 2;
  rowwise_internal::ParallelFor(ctx, max_positions, [&](int64_t begin, int64_t end, int) {
    for (int64_t p = begin; p < end; ++p) {
      float* row = storage + p * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(p) * inv_freq[i];
        row[i] = static_cast<float>(std::cos(angle));
        row[half + i] = static_cast<float>(std::sin(angle));
      }
    }
  });
  return {.data = storage, .max_positions = max_positions, .head_dim = head_dim};
}

RopeTable RopeBuildTable(const KernelCtx& ctx, int64_t max_positions, int64_t head_dim,
                         double theta, float* storage) {
  CheckHeadDim(head_dim);
  CHECK_GT(theta, 0.0) << "RoPE: theta must be > 0";
  // At most HD/2 doubles (HD <= 2048 covers every model); no heap allocation.
  constexpr int64_t kMaxHalf = 1024;
  CHECK_LE(head_dim / 2, kMaxHalf) << "RoPE: head_dim above " << 2 * kMaxHalf;
  double inv_freq[kMaxHalf];
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  return RopeBuildTableFromInvFreq(ctx, max_positions, head_dim, inv_freq, storage);
}

void RopeForward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                 int64_t token_stride, const int32_t* positions, int64_t position_offset,
                 float* x) {
  Apply(ctx, table, tokens, heads, token_stride, positions, position_offset, x, false);
}
void RopeForward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                 int64_t token_stride, const int32_t* positions, int64_t position_offset, BF16* x) {
  Apply(ctx, table, tokens, heads, token_stride, positions, position_offset, x, false);
}
void RopeBackward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                  int64_t token_stride, const int32_t* positions, int64_t position_offset,
                  float* dx) {
  Apply(ctx, table, tokens, heads, token_stride, positions, position_offset, dx, true);
}
void RopeBackward(const KernelCtx& ctx, const RopeTable& table, int64_t tokens, int64_t heads,
                  int64_t token_stride, const int32_t* positions, int64_t position_offset,
                  BF16* dx) {
  Apply(ctx, table, tokens, heads, token_stride, positions, position_offset, dx, true);
}

}  // namespace anvil::kernels
