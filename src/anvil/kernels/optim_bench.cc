// AdamW throughput over flat f32 buffers: reads p, g, m, v and writes p, m, v
// (28 bytes per element; +2 with the bf16 copy), 64k elements (1.8 MB: cache)
// and 32M elements (0.9 GB: DRAM), on 1 and 2 threads.
#include <benchmark/benchmark.h>

#include "anvil/kernels/optim.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

// Args: threads, n, with_bf16.
void BM_AdamW(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t n = state.range(1);
  const bool with_bf16 = state.range(2) != 0;
  Buffer<float> p(n, 1), g(n, 2, -1e-3f, 1e-3f), m(n, 3, -1e-3f, 1e-3f), v(n, 4, 0, 1e-6f);
  Buffer<BF16> p_bf16(with_bf16 ? n : 1, 5);
  const KernelCtx& ctx = Ctx(threads);
  const AdamWHyper hyper{.lr = 1e-4, .weight_decay = 0.1};
  int64_t step = 1;
  for (auto _ : state) {
    AdamWUpdate(ctx, hyper, step++, 1.0f, n, p.data(), g.data(), m.data(), v.data(),
                with_bf16 ? p_bf16.data() : nullptr);
    benchmark::ClobberMemory();
  }
  SetBytes(state, n * (28.0 + (with_bf16 ? 2.0 : 0.0)));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int bf16 : {0, 1}) {
      b->Args({threads, 1 << 16, bf16});
      b->Args({threads, 1 << 25, bf16});
    }
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_AdamW)->Apply(Shapes);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
