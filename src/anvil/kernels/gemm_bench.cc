// GEMM micro-benchmarks (Google Benchmark): the training and decode shapes on
// each tier and thread count. `anvil bench gemm` is the full comparison with
// peers and the peak; this is for quick iteration on one kernel.
#include <benchmark/benchmark.h>

#include <vector>

#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/gemm.h"

namespace anvil::kernels {
namespace {

template <typename T>
std::vector<T> Filled(size_t n, uint32_t step) {
  const RngStream rng(7, RngPurpose::kTest, step);
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float x = 2.0f * rng.Uniform(i) - 1.0f;
    if constexpr (sizeof(T) == 2) {
      v[i] = ToBF16(x);
    } else {
      v[i] = x;
    }
  }
  return v;
}

// Args: m, n, k, threads, isa, trans (bit 0: A, bit 1: B).
template <typename T>
void BM_Gemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  ThreadPool pool(static_cast<int>(state.range(3)));
  const Isa isa = static_cast<Isa>(state.range(4));
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const KernelCtx ctx(pool, isa);
  GemmArgs g{.m = m, .n = n, .k = k};
  g.trans_a = state.range(5) & 1 ? Trans::kT : Trans::kN;
  g.trans_b = state.range(5) & 2 ? Trans::kT : Trans::kN;
  const std::vector<T> a = Filled<T>(m * k, 1), b = Filled<T>(k * n, 2);
  std::vector<float> c(m * n);
  for (auto _ : state) {
    Gemm(ctx, g, a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
  state.counters["B_GB/s"] = benchmark::Counter(
      static_cast<double>(k * n * sizeof(T)), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}

void Shapes(benchmark::internal::Benchmark* b) {
  const int avx512 = static_cast<int>(Isa::kAvx512), avx2 = static_cast<int>(Isa::kAvx2);
  for (int isa : {avx512, avx2}) {
    for (int threads : {1, 2}) {
      b->Args({4096, 768, 768, threads, isa, 0});
      b->Args({4096, 768, 768, threads, isa, 1});
      b->Args({4096, 768, 768, threads, isa, 2});
      b->Args({4096, 3072, 768, threads, isa, 0});
      b->Args({1, 768, 768, threads, isa, 0});
      b->Args({8, 768, 768, threads, isa, 0});
      b->Args({1, 4096, 4096, threads, isa, 0});
    }
  }
}

BENCHMARK(BM_Gemm<float>)->Apply(Shapes)->UseRealTime();
BENCHMARK(BM_Gemm<BF16>)->Apply(Shapes)->UseRealTime();

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
