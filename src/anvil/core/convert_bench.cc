// Bulk conversion throughput per ISA in GB/s (bytes read plus written) at a
// cache-resident size (8 Ki elements: 32 KiB of f32) and a DRAM-sized one
// (32 Mi elements: 128 MiB of f32). Quick run: --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <map>
#include <random>
#include <span>
#include <vector>

#include "anvil/core/convert.h"

namespace anvil {
namespace {

constexpr int64_t kCacheElements = 8 << 10;
constexpr int64_t kDramElements = 32 << 20;

// Values spread over the fp8/bf16 ranges, including some overflow and
// subnormals, so no branch or lane pattern is unrealistically uniform.
// Generated once per size: the framework calls each benchmark several times.
const std::vector<float>& Inputs(int64_t n) {
  static std::map<int64_t, std::vector<float>> cache;
  std::vector<float>& v = cache[n];
  if (v.empty()) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 64.0f);
    v.resize(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
  }
  return v;
}

template <typename From, typename To, typename Convert>
void Run(benchmark::State& state, const std::vector<From>& src, Convert convert) {
  const auto isa = static_cast<Isa>(state.range(0));
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  std::vector<To> dst(src.size(), To{});  // touched now, not inside the timing
  for (auto _ : state) {
    convert(isa, std::span<const From>(src), std::span<To>(dst));
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(src.size()) * (sizeof(From) + sizeof(To));
  // Printed as e.g. "bytes=25.3G/s" (decimal GB/s); JSON output carries the raw rate.
  state.counters["bytes"] =
      benchmark::Counter(bytes * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(IsaName(isa));
}

void BM_F32ToBF16(benchmark::State& state) {
  Run<float, uint16_t>(state, Inputs(state.range(1)),
                       [](Isa isa, auto s, auto d) { F32ToBF16(isa, s, d); });
}

void BM_BF16ToF32(benchmark::State& state) {
  const std::vector<float>& f = Inputs(state.range(1));
  std::vector<uint16_t> src(f.size());
  F32ToBF16(Isa::kScalar, f, src);
  Run<uint16_t, float>(state, src, [](Isa isa, auto s, auto d) { BF16ToF32(isa, s, d); });
}

void BM_F32ToE4M3(benchmark::State& state) {
  Run<float, uint8_t>(state, Inputs(state.range(1)),
                      [](Isa isa, auto s, auto d) { F32ToE4M3(isa, s, d, Overflow::kSaturate); });
}

// range(0): Isa (0 scalar, 1 avx2, 2 avx512); range(1): elements.
void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"isa", "n"})
      ->ArgsProduct({{static_cast<int64_t>(Isa::kScalar), static_cast<int64_t>(Isa::kAvx2),
                      static_cast<int64_t>(Isa::kAvx512)},
                     {kCacheElements, kDramElements}})
      ->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_F32ToBF16)->Apply(Args);
BENCHMARK(BM_BF16ToF32)->Apply(Args);
BENCHMARK(BM_F32ToE4M3)->Apply(Args);

}  // namespace
}  // namespace anvil

BENCHMARK_MAIN();
