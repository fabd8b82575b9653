// Embedding throughput: forward gathers (f32 copy, f32 -> bf16) and backward
// scatter-adds into an f32 table of 32000 x 4096 (500 MiB: rows come from
// DRAM), for 64 tokens (decode-like) and 4096 tokens, on 1 and 2 threads. GB/s counts the rows read
// and written (backward: dout read, dtable rows read and written).
#include <benchmark/benchmark.h>

#include <vector>

#include "anvil/kernels/embedding.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

constexpr int64_t kVocab = 32000, kDim = 4096;  // 500 MiB f32 table

Buffer<float>& Table() {
  static Buffer<float> table(kVocab * kDim, 1);
  return table;
}

std::vector<int32_t> Ids(int64_t tokens) {
  std::vector<int32_t> ids(tokens);
  for (int64_t t = 0; t < tokens; ++t) ids[t] = static_cast<int32_t>((t * 2654435761u) % kVocab);
  return ids;
}

// Args: threads, tokens.
template <typename Out>
void BM_EmbeddingForward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t tokens = state.range(1);
  const auto ids = Ids(tokens);
  Buffer<Out> out(tokens * kDim, 2);
  const KernelCtx& ctx = Ctx(threads);
  const float* table = Table().data();  // built (and touched) outside the timing
  for (auto _ : state) {
    EmbeddingForward(ctx, tokens, kVocab, kDim, table, ids.data(), out.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, tokens * kDim * (4.0 + sizeof(Out)));
}

void BM_EmbeddingBackward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t tokens = state.range(1);
  const auto ids = Ids(tokens);
  Buffer<float> dout(tokens * kDim, 3, -1e-3f, 1e-3f);
  const KernelCtx& ctx = Ctx(threads);
  float* table = Table().data();
  for (auto _ : state) {
    EmbeddingBackward(ctx, tokens, kVocab, kDim, ids.data(), dout.data(), table);
    benchmark::ClobberMemory();
  }
  SetBytes(state, tokens * kDim * 12.0);
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({threads, 64});
    b->Args({threads, 4096});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_EmbeddingForward<float>)->Apply(Shapes);
BENCHMARK(BM_EmbeddingForward<BF16>)->Apply(Shapes);
BENCHMARK(BM_EmbeddingBackward)->Apply(Shapes);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
