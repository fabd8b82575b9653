// Fused softmax cross-entropy: argument and target checks, the tier dispatch,
// the row partition, and the loss sums (in row order, after the threads), plus
// the portable tier (F32x1).
#include "anvil/kernels/xent.h"

#include <type_traits>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/kernels/cpu/xent_impl.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace xent_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::xent::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace xent_internal

namespace {

const xent_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, xent_internal::ScalarKernels,
                                          xent_internal::Avx2Kernels, xent_internal::Avx512Kernels);
}

void CheckArgs(int64_t rows, int64_t vocab, const void* logits, const int32_t* targets,
               int32_t ignore_index) {
  CHECK_GE(rows, 0) << "CrossEntropy: rows must be >= 0";
  CHECK_GT(vocab, 0) << "CrossEntropy: vocab must be > 0";
  CHECK(rows == 0 || (logits != nullptr && targets != nullptr))
      << "CrossEntropy: logits and targets must be non-null";
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t t = targets[r];
    CHECK(t == ignore_index || (t >= 0 && t < vocab))
        << "CrossEntropy: row " << r << " has target " << t << ", outside [0, " << vocab
        << ") and not the ignore_index " << ignore_index;
  }
}

}  // namespace

CrossEntropyStats CrossEntropyRowStats(int64_t rows, const int32_t* targets, int32_t ignore_index,
                                       float z_loss_coef, const float* loss, const float* lse) {
  CrossEntropyStats stats;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) continue;
    ++stats.valid_rows;
    stats.loss_sum += loss[r];
    stats.z_loss_sum += static_cast<double>(z_loss_coef) * lse[r] * lse[r];
  }
  return stats;
}

namespace {

template <typename T>
CrossEntropyStats Forward(const KernelCtx& ctx, int64_t rows, int64_t vocab, const T* logits,
                          const int32_t* targets, int32_t ignore_index, float z_loss_coef,
                          float* loss, float* lse) {
  ANVIL_TRACE_ZONE("xent_fwd");
  CheckArgs(rows, vocab, logits, targets, ignore_index);
  CHECK(rows == 0 || (loss != nullptr && lse != nullptr))
      << "CrossEntropyForward: loss and lse must be non-null";
  const xent_internal::Args<T> args{.vocab = vocab,
                                    .logits = logits,
                                    .targets = targets,
                                    .ignore_index = ignore_index,
                                    .z_loss_coef = z_loss_coef,
                                    .loss = loss,
                                    .lse = lse,
                                    .dloss = nullptr,
                                    .dloss_scale = 0.0f,
                                    .dlogits = nullptr};
  const auto& k = KernelsFor(ctx.isa());
  const auto fn = [&] {
    if constexpr (std::is_same_v<T, BF16>)
      return k.forward_bf16;
    else
      return k.forward_f32;
  }();
  rowwise_internal::ParallelFor(ctx, rows,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
  return CrossEntropyRowStats(rows, targets, ignore_index, z_loss_coef, loss, lse);
}

template <typename T>
void Backward(const KernelCtx& ctx, int64_t rows, int64_t vocab, const T* logits,
              const int32_t* targets, int32_t ignore_index, float z_loss_coef, const float* lse,
              const float* dloss, float dloss_scale, T* dlogits) {
  ANVIL_TRACE_ZONE("xent_bwd");
  CheckArgs(rows, vocab, logits, targets, ignore_index);
  CHECK(rows == 0 || (lse != nullptr && dlogits != nullptr))
      << "CrossEntropyBackward: lse and dlogits must be non-null";
  const xent_internal::Args<T> args{.vocab = vocab,
                                    .logits = logits,
                                    .targets = targets,
                                    .ignore_index = ignore_index,
                                    .z_loss_coef = z_loss_coef,
                                    .loss = nullptr,
                                    .lse = const_cast<float*>(lse),
                                    .dloss = dloss,
                                    .dloss_scale = dloss_scale,
                                    .dlogits = dlogits};
  const auto& k = KernelsFor(ctx.isa());
  const auto fn = [&] {
    if constexpr (std::is_same_v<T, BF16>)
      return k.backward_bf16;
    else
      return k.backward_f32;
  }();
  rowwise_internal::ParallelFor(ctx, rows,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
}

}  // namespace

CrossEntropyStats CrossEntropyForward(const KernelCtx& ctx, int64_t rows, int64_t vocab,
                                      const float* logits, const int32_t* targets,
                                      int32_t ignore_index, float z_loss_coef, float* loss,
                                      float* lse) {
  return Forward(ctx, rows, vocab, logits, targets, ignore_index, z_loss_coef, loss, lse);
}
CrossEntropyStats CrossEntropyForward(const KernelCtx& ctx, int64_t rows, int64_t vocab,
                                      const BF16* logits, const int32_t* targets,
                                      int32_t ignore_index, float z_loss_coef, float* loss,
                                      float* lse) {
  return Forward(ctx, rows, vocab, logits, targets, ignore_index, z_loss_coef, loss, lse);
}
void CrossEntropyBackward(const KernelCtx& ctx, int64_t rows, int64_t vocab, const float* logits,
                          const int32_t* targets, int32_t ignore_index, float z_loss_coef,
                          const float* lse, const float* dloss, float dloss_scale, float* dlogits) {
  Backward(ctx, rows, vocab, logits, targets, ignore_index, z_loss_coef, lse, dloss, dloss_scale,
           dlogits);
}
void CrossEntropyBackward(const KernelCtx& ctx, int64_t rows, int64_t vocab, const BF16* logits,
                          const int32_t* targets, int32_t ignore_index, float z_loss_coef,
                          const float* lse, const float* dloss, float dloss_scale, BF16* dlogits) {
  Backward(ctx, rows, vocab, logits, targets, ignore_index, z_loss_coef, lse, dloss, dloss_scale,
           dlogits);
}

}  // namespace anvil::kernels
