// SwiGLU throughput, f32 and bf16, forward (reads 2F, writes F per token) and
// backward (reads 3F, writes 2F), in cache (16 tokens x F 4096) and from DRAM
// (4096 tokens x F 4096), 1 and 2 threads.
#include <benchmark/benchmark.h>

#include "anvil/kernels/act.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

// Args: threads, tokens, f.
template <typename T, bool kBackward>
void BM_SwiGlu(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t tokens = state.range(1), f = state.range(2);
  Buffer<T> gu(tokens * 2 * f, 1, -6, 6), dout(kBackward ? tokens * f : 1, 2),
      out(tokens * (kBackward ? 2 : 1) * f, 3);
  const KernelCtx& ctx = Ctx(threads);
  for (auto _ : state) {
    if constexpr (kBackward) {
      SwiGluBackward(ctx, tokens, f, gu.data(), dout.data(), out.data());
    } else {
      SwiGluForward(ctx, tokens, f, gu.data(), out.data());
    }
    benchmark::ClobberMemory();
  }
  SetBytes(state, (kBackward ? 5.0 : 3.0) * tokens * f * sizeof(T));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({threads, 16, 4096});
    b->Args({threads, 4096, 4096});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_SwiGlu<float, false>)->Apply(Shapes);
BENCHMARK(BM_SwiGlu<BF16, false>)->Apply(Shapes);
BENCHMARK(BM_SwiGlu<float, true>)->Apply(Shapes);
BENCHMARK(BM_SwiGlu<BF16, true>)->Apply(Shapes);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
