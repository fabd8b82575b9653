// The sampler's softmax row: ExpRunningSums per tier over a vocabulary of 8192
// (tiny, the RL models) and 32000 logits, beside the loop it replaced (glibc's
// exp per element, then the running sum). Single thread: a sampler's row is
// one thread's work. Counter: elements per second.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "anvil/kernels/exp_sums.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;

constexpr double kInvTemperature = 1.0 / 0.8;

// Args: vocabulary, tier (0 scalar, 1 AVX2, 2 AVX-512).
void BM_ExpRunningSums(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Isa isa = static_cast<Isa>(state.range(1));
  if (!IsaSupported(isa)) {
    state.SkipWithError("tier not supported by this CPU");
    return;
  }
  Buffer<float> logits(n, 1, -20, 20);
  const float top = *std::max_element(logits.data(), logits.data() + n);
  std::vector<double> weights(n), sums(n);
  for (auto _ : state) {
    ExpRunningSums(isa, n, logits.data(), kInvTemperature, top * kInvTemperature, weights.data(),
                   sums.data());
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(IsaName(isa));
}
BENCHMARK(BM_ExpRunningSums)->ArgsProduct({{8192, 32000}, {0, 1, 2}});

// The sampler's loop before ExpRunningSums: libm's exp, one element at a time.
void BM_LibmExpLoop(benchmark::State& state) {
  const int64_t n = state.range(0);
  Buffer<float> logits(n, 1, -20, 20);
  const double top = *std::max_element(logits.data(), logits.data() + n) * kInvTemperature;
  std::vector<double> weights(n), sums(n);
  for (auto _ : state) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      weights[i] = std::exp(logits.data()[i] * kInvTemperature - top);
      sum += weights[i];
      sums[i] = sum;
    }
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_LibmExpLoop)->Arg(8192)->Arg(32000);

// The sampler's scan for the largest logit (FirstMaxIndex), per tier; the
// scalar tier is the loop it replaced. Args: vocabulary, tier.
void BM_FirstMaxIndex(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Isa isa = static_cast<Isa>(state.range(1));
  if (!IsaSupported(isa)) {
    state.SkipWithError("tier not supported by this CPU");
    return;
  }
  Buffer<float> logits(n, 1, -20, 20);
  for (auto _ : state) benchmark::DoNotOptimize(FirstMaxIndex(isa, n, logits.data()));
  state.SetItemsProcessed(state.iterations() * n);
  state.SetLabel(IsaName(isa));
}
BENCHMARK(BM_FirstMaxIndex)->ArgsProduct({{8192, 32000}, {0, 1, 2}});

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
