// Peak measurement drivers: ISA dispatch, threading and timing.
#include "anvil/profile/peak.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/clock.h"

namespace anvil::profile {
namespace {

// Short trials, many of them: a trial's best is taken, so a trial that ran
// while another process held a core counts only if all did.
constexpr long kIterations = 4'000'000;  // ~10-20 ms per trial on a 3+ GHz core
constexpr int kTrials = 12;

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

// GFLOP/s of one trial of `loop`, run on every thread of `pool` at once.
double TrialGflops(ThreadPool& pool, double (*loop)(long)) {
  std::vector<double> flops(pool.size());
  Stopwatch watch;
  pool.RunOnAll([&](int t) { flops[t] = loop(kIterations); });
  const double seconds = watch.Seconds();
  double total = 0;
  for (double f : flops) total += f;
  return total / seconds * 1e-9;
}

// The best trial of each loop, their trials interleaved: "auto" precision
// compares the two peaks, and a burst of load from another process (a test
// beside this one, a build) must slow both loops' trials, never only the
// second loop's, or the comparison flips.
std::vector<double> BestGflops(ThreadPool& pool, std::span<double (*const)(long)> loops) {
  std::vector<double> best(loops.size(), 0.0);
  for (int trial = 0; trial < kTrials; ++trial) {
    for (size_t i = 0; i < loops.size(); ++i) {
      best[i] = std::max(best[i], TrialGflops(pool, loops[i]));
    }
  }
  return best;
}

}  // namespace

PeakFlops MeasurePeakFlops(ThreadPool& pool) {
  PeakFlops peak;
  peak.isa = BestIsa();
  double (*fma_loop)(long) = &FmaLoopScalar;
  if (peak.isa == Isa::kAvx512) fma_loop = &detail::FmaLoopAvx512;
  if (peak.isa == Isa::kAvx2) fma_loop = &detail::FmaLoopAvx2;
  peak.bf16_native = peak.isa == Isa::kAvx512 && GetCpuFeatures().avx512_bf16;
  if (!peak.bf16_native) {
    peak.f32_gflops = BestGflops(pool, std::span(&fma_loop, 1))[0];
    peak.bf16_gflops = peak.bf16_dot_gflops = peak.f32_gflops;
    return peak;
  }
  peak.amx = AmxEnabled();
  double (*const loops[3])(long) = {fma_loop, &detail::Bf16DotLoopAvx512,
                                    &detail::Bf16TileLoopAmx};
  const std::vector<double> best = BestGflops(pool, std::span(loops, peak.amx ? 3 : 2));
  peak.f32_gflops = best[0];
  peak.bf16_dot_gflops = best[1];
  peak.bf16_gflops = peak.amx ? best[2] : best[1];
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
