// RMSNorm: argument checks, the tier dispatch and the thread partition (rows
// for forward; blocks of rows handing dweight's sums on for backward), plus
// the portable tier (F32x1).
#include "anvil/kernels/norm.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <type_traits>

#include "anvil/core/check.h"
#include "anvil/core/intrinsics.h"
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

// Backward's blocks of rows: x and dy of one block (half of one core's L2)
// stay in its thread's L2 over the block's three passes; the row scales fit
// on the stack.
constexpr int64_t kBlockBytes = kL2Bytes / 4;
constexpr int64_t kMaxBlockRows = 256;
// Backward's steps of columns, the unit in which dweight's sums go from one
// block to the next. A cache line takes ~250 ns between this host's two
// cores, so on 2 threads one step per row was fastest up to dim 4096 (steps
// of 1024 columns: 1-14% slower, docs/PERFORMANCE.md). With many threads,
// smaller steps would let several blocks' dweight passes overlap (each
// block trailing the one before by two steps).
constexpr int64_t kStepColumns = 4096;
constexpr int64_t kLineBytes = 64;
// Pauses before a waiting thread yields its core (as the pool's spin).
constexpr int kSpinsBeforeYield = 2000;

const norm_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, norm_internal::ScalarKernels,
                                          norm_internal::Avx2Kernels, norm_internal::Avx512Kernels);
}

// The f32 or the bf16 one of a kernel table's pair.
template <typename T, typename F32, typename Bf16>
auto ForType(F32 f32, Bf16 bf16) {
  if constexpr (std::is_same_v<T, float>) {
    return f32;
  } else {
    return bf16;
  }
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
  const auto& kernels = KernelsFor(ctx.isa());
  const auto fn = ForType<T>(kernels.forward_f32, kernels.forward_bf16);
  rowwise_internal::ParallelFor(ctx, rows,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
}

// Waits until `turn` (a step's count of blocks done) reaches b, block b - 1
// of rows having added its sums: spinning first, since the hand-offs come
// microseconds apart, then yielding, so that with more threads than cores
// the thread being waited for gets to run.
void WaitForTurn(int64_t& turn, int64_t b) {
  const std::atomic_ref<int64_t> t(turn);
  for (int spins = 0; t.load(std::memory_order_acquire) != b;) {
    if (spins < kSpinsBeforeYield) {
      ++spins;
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
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
  if (rows == 0) return;
  const norm_internal::Args<T> args{.dim = dim,
                                    .x = x,
                                    .weight = weight,
                                    .eps = 0.0f,
                                    .y = nullptr,
                                    .rstd = const_cast<float*>(rstd),
                                    .dy = dy,
                                    .dx = dx,
                                    .dweight = dweight,
                                    .prefetch = false};
  const auto& kernels = KernelsFor(ctx.isa());
  const auto row_scales_fn =
      ForType<T>(kernels.backward_row_scales_f32, kernels.backward_row_scales_bf16);
  const auto step_fn =
      ForType<T>(kernels.backward_dweight_step_f32, kernels.backward_dweight_step_bf16);
  const auto dx_fn = ForType<T>(kernels.backward_dx_f32, kernels.backward_dx_bf16);

  // Each thread takes whole blocks of rows, the next free one at a time, and
  // makes three passes over a block, all in its own L2 after the first:
  //   the row scales (reading x and dy from DRAM),
  //   dweight, step by step of columns,
  //   dx (after dweight, since dx may overwrite dy).
  // dweight's row-order sums go from block to block in acc: turn[s] counts
  // the blocks that have added their rows to step s, and block b takes step
  // s once turn[s + 1] == b (the block before is done with s and the next
  // step, whose sums are then asked for ahead; the last step waits on its
  // own turn): a wavefront. The row-scale and dx passes never wait, so one
  // thread's dweight pass overlaps the other's. Blocks are taken in order,
  // so the lowest unfinished block never waits: no deadlock, even where the
  // pool runs its threads one after another. Which thread takes which block
  // changes no bits.
  //
  // (Before: dweight split across threads by columns and dx by rows, so
  // half of what each thread's dx pass read sat in the other core's L2;
  // 2 threads, dim 4096, f32 from DRAM: 29 -> 35 GB/s, in L2 43 -> 73.)
  const int64_t row_bytes = 2 * dim * static_cast<int64_t>(sizeof(T));  // x and dy
  const int64_t block_rows = std::clamp<int64_t>(
      std::min(kBlockBytes / row_bytes, (rows + ctx.threads() - 1) / ctx.threads()), 1,
      kMaxBlockRows);
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  const int64_t steps = (dim + kStepColumns - 1) / kStepColumns;
  const size_t scratch_bytes =
      static_cast<size_t>(steps * kLineBytes + dim * int64_t{sizeof(float)});
  CHECK_GE(ctx.scratch_bytes(), scratch_bytes)
      << "RmsNormBackward: needs " << scratch_bytes << " bytes of scratch (thread 0's)";
  // A line per turn: a turn is written by one core and read by another.
  int64_t* turn = reinterpret_cast<int64_t*>(ctx.scratch(0));
  constexpr int64_t kTurnStride = kLineBytes / sizeof(int64_t);
  float* acc = reinterpret_cast<float*>(turn + kTurnStride * steps);
  std::fill(turn, turn + kTurnStride * steps, 0);
  alignas(64) std::atomic<int64_t> next_block{0};
  const auto work = [&](int) {
    float row_scales[kMaxBlockRows];
    for (int64_t b; (b = next_block.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
      const int64_t r0 = b * block_rows, r1 = std::min(rows, r0 + block_rows);
      row_scales_fn(args, r0, r1, row_scales);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t c0 = s * kStepColumns, c1 = std::min(dim, c0 + kStepColumns);
        const int64_t wait_step = std::min(s + 1, steps - 1);  // see above
        WaitForTurn(turn[kTurnStride * wait_step], b);
        if (b > 0) {
          for (int64_t c = c1; c < std::min(dim, c1 + kStepColumns);
               c += kLineBytes / sizeof(float)) {
            __builtin_prefetch(acc + c, 1, 3);
          }
        }
        step_fn(args, {.row_begin = r0,
                       .row_end = r1,
                       .col_begin = c0,
                       .col_end = c1,
                       .acc = acc,
                       .first = b == 0,
                       .last = b == blocks - 1});
        std::atomic_ref<int64_t>(turn[kTurnStride * s]).store(b + 1, std::memory_order_release);
      }
      dx_fn(args, r0, r1, row_scales);
    }
  };
  if (blocks == 1) {
    work(0);
  } else {
    ctx.pool().RunOnAll(work);
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
