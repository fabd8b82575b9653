// Embedding: id checks, the tier dispatch, the token partition (forward) and
// the column partition (backward), plus the portable tier (F32x1).
#include "anvil/kernels/embedding.h"

#include <cstring>
#include <type_traits>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/embedding_impl.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace embedding_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::embedding::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace embedding_internal

namespace {

const embedding_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, embedding_internal::ScalarKernels,
                                          embedding_internal::Avx2Kernels,
                                          embedding_internal::Avx512Kernels);
}

void CheckArgs(int64_t tokens, int64_t vocab, int64_t dim, const int32_t* ids, const void* src,
               const void* dst) {
  CHECK_GE(tokens, 0) << "Embedding: tokens must be >= 0";
  CHECK_GT(vocab, 0) << "Embedding: vocab must be > 0";
  CHECK_GT(dim, 0) << "Embedding: dim must be > 0";
  CHECK(tokens == 0 || (ids != nullptr && src != nullptr && dst != nullptr))
      << "Embedding: ids and buffers must be non-null";
  for (int64_t t = 0; t < tokens; ++t) {
    CHECK(ids[t] >= 0 && ids[t] < vocab)
        << "Embedding: token " << t << " has id " << ids[t] << ", outside [0, " << vocab << ")";
  }
}

// Same dtype: rows are copied as bytes (bit-exact, NaN payloads included).
template <typename T>
void ForwardCopy(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim, const T* table,
                 const int32_t* ids, T* out) {
  ANVIL_TRACE_ZONE("embedding_fwd");
  CheckArgs(tokens, vocab, dim, ids, table, out);
  rowwise_internal::ParallelFor(ctx, tokens, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) {
      std::memcpy(out + t * dim, table + ids[t] * dim, static_cast<size_t>(dim) * sizeof(T));
    }
  });
}

template <typename In>
void Backward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim, const int32_t* ids,
              const In* dout, float* dtable) {
  ANVIL_TRACE_ZONE("embedding_bwd");
  CheckArgs(tokens, vocab, dim, ids, dout, dtable);
  const embedding_internal::Args<In, float> args{
      .dim = dim, .ids = ids, .src = dout, .dst = dtable};
  const auto& k = KernelsFor(ctx.isa());
  const auto fn = [&] {
    if constexpr (std::is_same_v<In, BF16>)
      return k.backward_bf16;
    else
      return k.backward_f32;
  }();
  if (tokens == 0) return;
  constexpr int64_t kBlock = embedding_internal::kColumnBlock;
  rowwise_internal::ParallelFor(
      ctx, (dim + kBlock - 1) / kBlock, [&](int64_t begin, int64_t end, int) {
        fn(args, tokens, begin * kBlock, end * kBlock < dim ? end * kBlock : dim);
      });
}

}  // namespace

void EmbeddingForward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                      const float* table, const int32_t* ids, float* out) {
  ForwardCopy(ctx, tokens, vocab, dim, table, ids, out);
}
void EmbeddingForward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                      const BF16* table, const int32_t* ids, BF16* out) {
  ForwardCopy(ctx, tokens, vocab, dim, table, ids, out);
}
void EmbeddingForward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                      const float* table, const int32_t* ids, BF16* out) {
  ANVIL_TRACE_ZONE("embedding_fwd");
  CheckArgs(tokens, vocab, dim, ids, table, out);
  const embedding_internal::Args<float, BF16> args{
      .dim = dim, .ids = ids, .src = table, .dst = out};
  const auto fn = KernelsFor(ctx.isa()).forward_f32_to_bf16;
  rowwise_internal::ParallelFor(ctx, tokens,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
}
void EmbeddingBackward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                       const int32_t* ids, const float* dout, float* dtable) {
  Backward(ctx, tokens, vocab, dim, ids, dout, dtable);
}
void EmbeddingBackward(const KernelCtx& ctx, int64_t tokens, int64_t vocab, int64_t dim,
                       const int32_t* ids, const BF16* dout, float* dtable) {
  Backward(ctx, tokens, vocab, dim, ids, dout, dtable);
}

}  // namespace anvil::kernels
