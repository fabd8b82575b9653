// RoPE throughput, in place (each element read and written once): a training
// pass (Q of a 4096-token batch, 32 heads x 128, in DRAM), an in-cache pass
// (64 tokens) and a decode step (1 token), f32 and bf16, 1 and 2 threads.
#include <benchmark/benchmark.h>

#include "anvil/kernels/rope.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

constexpr int64_t kHeads = 32, kHeadDim = 128, kMaxPositions = 8192;

// Args: threads, tokens.
template <typename T, bool kBackward>
void BM_Rope(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t tokens = state.range(1);
  const KernelCtx& ctx = Ctx(threads);
  static Buffer<float> storage(kMaxPositions * kHeadDim);
  static const RopeTable table =
      RopeBuildTable(ctx, kMaxPositions, kHeadDim, 500000.0, storage.data());
  Buffer<T> x(tokens * kHeads * kHeadDim);
  for (auto _ : state) {
    if constexpr (kBackward) {
      RopeBackward(ctx, table, tokens, kHeads, kHeads * kHeadDim, nullptr, 0, x.data());
    } else {
      RopeForward(ctx, table, tokens, kHeads, kHeads * kHeadDim, nullptr, 0, x.data());
    }
    benchmark::ClobberMemory();
  }
  // x read and written; one table row (HD floats) per token.
  SetBytes(state, tokens * (2.0 * kHeads * kHeadDim * sizeof(T) + kHeadDim * 4.0));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({threads, 1});
    b->Args({threads, 64});
    b->Args({threads, 4096});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Rope<float, false>)->Apply(Shapes);
BENCHMARK(BM_Rope<BF16, false>)->Apply(Shapes);
BENCHMARK(BM_Rope<float, true>)->Apply(Shapes);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
