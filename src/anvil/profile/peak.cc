// Peak measurement drivers: ISA dispatch, threading and timing.
#include "anvil/profile/peak.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/clock.h"

namespace anvil::profile {
namespace {

constexpr long kIterations = 20'000'000;  // ~50-100 ms per trial on a 3+ GHz core
constexpr int kTrials = 5;

// Portable fallback so every machine reports something.
double FmaLoopScalar(long iterations) {
  float acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = 0.001f * i;
  for (long it = 0; it < iterations; ++it) {
    for (float& a : acc) a = std::fma(a, 0.999999f, 1e-7f);
    __asm__ volatile("" : : "r"(acc) : "memory");
  }
  volatile float sink = acc[0];
  (void)sink;
  return 2.0 * 8 * static_cast<double>(iterations);
}

// Best-of-trials GFLOP/s of `loop` run on every thread of `pool` at once.
double BestGflops(ThreadPool& pool, double (*loop)(long)) {
  std::vector<double> flops(pool.size());
  double best = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    Stopwatch watch;
    pool.RunOnAll([&](int t) { flops[t] = loop(kIterations); });
    const double seconds = watch.Seconds();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / seconds * 1e-9);
  }
  return best;
}

}  // namespace

PeakFlops MeasurePeakFlops(ThreadPool& pool) {
  PeakFlops peak;
  peak.isa = BestIsa();
  switch (peak.isa) {
    case Isa::kAvx512: peak.f32_gflops = BestGflops(pool, &detail::FmaLoopAvx512); break;
    case Isa::kAvx2: peak.f32_gflops = BestGflops(pool, &detail::FmaLoopAvx2); break;
    case Isa::kScalar: peak.f32_gflops = BestGflops(pool, &FmaLoopScalar); break;
  }
  peak.bf16_native = peak.isa == Isa::kAvx512 && GetCpuFeatures().avx512_bf16;
  peak.bf16_gflops =
      peak.bf16_native ? BestGflops(pool, &detail::Bf16DotLoopAvx512) : peak.f32_gflops;
  return peak;
}

double MeasureReadBandwidth(ThreadPool& pool) {
  constexpr long kFloats = 64L << 20;  // 256 MiB
  AlignedBuffer buffer(kFloats * sizeof(float));
  float* data = reinterpret_cast<float*>(buffer.data());
  // Each thread first-touches the part it will read.
  pool.ParallelFor(kFloats, [&](int64_t b, int64_t e, int) {
    std::fill(data + b, data + e, 1.0f);
  });
  const Isa isa = BestIsa();
  std::vector<double> sums(pool.size());
  double best = 0;
  for (int trial = 0; trial < 3; ++trial) {
    Stopwatch watch;
    pool.ParallelFor(kFloats, [&](int64_t b, int64_t e, int t) {
      // Chunks start on 64-byte boundaries only if the split does; realign.
      const int64_t start = std::min(e, (b + 15) / 16 * 16);
      double s = 0;
      for (int64_t i = b; i < start; ++i) s += data[i];
      const long n = static_cast<long>(e - start);
      switch (isa) {
        case Isa::kAvx512: s += detail::ReadSumAvx512(data + start, n); break;
        case Isa::kAvx2: s += detail::ReadSumAvx2(data + start, n); break;
        case Isa::kScalar:
          for (int64_t i = start; i < e; ++i) s += data[i];
          break;
      }
      sums[t] = s;
    });
    best = std::max(best, kFloats * sizeof(float) / watch.Seconds() * 1e-9);
  }
  return best;
}

}  // namespace anvil::profile
