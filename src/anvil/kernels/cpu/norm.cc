// RMSNorm: argument checks, the tier dispatch and the thread partition (rows
// for y and dx, column blocks for dweight), plus the portable tier (F32x1).
#include "anvil/kernels/norm.h"

#include <algorithm>
#include <type_traits>
#include <utility>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/norm_impl.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace norm_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::norm::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace norm_internal

namespace {

using rowwise_internal::kL2Bytes;

// Bytes of x and dy per block of rows in backward: half of the L2, leaving
// room for dx and dweight.
constexpr int64_t kBlockBytes = kL2Bytes / 2;

const norm_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, norm_internal::ScalarKernels,
                                          norm_internal::Avx2Kernels, norm_internal::Avx512Kernels);
}

void CheckShape(int64_t rows, int64_t dim, const void* x, const float* weight) {
  CHECK_GE(rows, 0) << "RmsNorm: rows must be >= 0";
  CHECK_GT(dim, 0) << "RmsNorm: dim must be > 0";
  CHECK(rows == 0 || (x != nullptr && weight != nullptr))
      << "RmsNorm: x and weight must be non-null";
}

template <typename T>
void Forward(const KernelCtx& ctx, int64_t rows, int64_t dim, const T* x, const float* weight,
             float eps, T* y, float* rstd) {
  ANVIL_TRACE_ZONE("rmsnorm_fwd");
  CheckShape(rows, dim, x, weight);
  CHECK(rows == 0 || y != nullptr) << "RmsNormForward: y must be non-null";
  CHECK_GE(eps, 0.0f) << "RmsNormForward: eps must be >= 0";
  const norm_internal::Args<T> args{
      .dim = dim,
      .x = x,
      .weight = weight,
      .eps = eps,
      .y = y,
      .rstd = rstd,
      .dy = nullptr,
      .dx = nullptr,
      .dweight = nullptr,
      .prefetch = rows * dim * static_cast<int64_t>(sizeof(T)) > kL2Bytes};
  const auto& k = KernelsFor(ctx.isa());
  const auto fn = [&] {
    if constexpr (std::is_same_v<T, float>)
      return k.forward_f32;
    else
      return k.forward_bf16;
  }();
  rowwise_internal::ParallelFor(ctx, rows,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
}

template <typename T>
void Backward(const KernelCtx& ctx, int64_t rows, int64_t dim, const T* x, const float* weight,
              const float* rstd, const T* dy, T* dx, float* dweight) {
  ANVIL_TRACE_ZONE("rmsnorm_bwd");
  CheckShape(rows, dim, x, weight);
  CHECK(rows == 0 || (rstd != nullptr && dy != nullptr && dx != nullptr && dweight != nullptr))
      << "RmsNormBackward: rstd, dy, dx and dweight must be non-null";
  CHECK(static_cast<const void*>(dx) != static_cast<const void*>(x) || rows == 0)
      << "RmsNormBackward: dx must not alias x";
  const norm_internal::Args<T> args{
      .dim = dim,
      .x = x,
      .weight = weight,
      .eps = 0.0f,
      .y = nullptr,
      .rstd = const_cast<float*>(rstd),
      .dy = dy,
      .dx = dx,
      .dweight = dweight,
      .prefetch = 2 * rows * dim * static_cast<int64_t>(sizeof(T)) > kL2Bytes};
  const auto& k = KernelsFor(ctx.isa());
  const auto [dw_fn, dx_fn] = [&] {
    if constexpr (std::is_same_v<T, float>)
      return std::pair{k.backward_dw_f32, k.backward_dx_f32};
    else
      return std::pair{k.backward_dw_bf16, k.backward_dx_bf16};
  }();
  if (rows == 0) return;
  // Rows go in blocks small enough to stay in the two cores' L2 between the
  // dweight and dx passes, so x and dy come from DRAM once. Per block:
  // dweight first (dx may overwrite dy), whole column blocks per thread, each
  // thread carrying its columns' running sums in its scratch from block to
  // block; then dx by rows. The partition is the same for every block.
  CHECK_GE(ctx.scratch_bytes(), static_cast<size_t>(dim) * sizeof(float))
      << "RmsNormBackward: needs dim floats of scratch per thread";
  const int64_t block_rows =
      std::max<int64_t>(1, kBlockBytes / (2 * dim * static_cast<int64_t>(sizeof(T))));
  const int64_t col_block = k.dw_block_columns;
  for (int64_t r0 = 0; r0 < rows; r0 += block_rows) {
    const int64_t r1 = std::min(rows, r0 + block_rows);
    rowwise_internal::ParallelFor(
        ctx, (dim + col_block - 1) / col_block, [&](int64_t begin, int64_t end, int t) {
          const norm_internal::DwRange range{.row_begin = r0,
                                             .row_end = r1,
                                             .col_begin = begin * col_block,
                                             .col_end = std::min(end * col_block, dim),
                                             .acc = reinterpret_cast<float*>(ctx.scratch(t)),
                                             .first = r0 == 0,
                                             .last = r1 == rows};
          dw_fn(args, range);
        });
    rowwise_internal::ParallelFor(
        ctx, r1 - r0, [&](int64_t begin, int64_t end, int) { dx_fn(args, r0 + begin, r0 + end); });
  }
}

}  // namespace

void RmsNormForward(const KernelCtx& ctx, int64_t rows, int64_t dim, const float* x,
                    const float* weight, float eps, float* y, float* rstd) {
  Forward(ctx, rows, dim, x, weight, eps, y, rstd);
}
void RmsNormForward(const KernelCtx& ctx, int64_t rows, int64_t dim, const BF16* x,
                    const float* weight, float eps, BF16* y, float* rstd) {
  Forward(ctx, rows, dim, x, weight, eps, y, rstd);
}
void RmsNormBackward(const KernelCtx& ctx, int64_t rows, int64_t dim, const float* x,
                     const float* weight, const float* rstd, const float* dy, float* dx,
                     float* dweight) {
  Backward(ctx, rows, dim, x, weight, rstd, dy, dx, dweight);
}
void RmsNormBackward(const KernelCtx& ctx, int64_t rows, int64_t dim, const BF16* x,
                     const float* weight, const float* rstd, const BF16* dy, BF16* dx,
                     float* dweight) {
  Backward(ctx, rows, dim, x, weight, rstd, dy, dx, dweight);
}

}  // namespace anvil::kernels
