// The measured peaks decide "auto" precision (bf16 where its dot product
// outruns f32 FMA by 1.25x), so their ratio must not depend on what else the
// machine is doing: a test or a build beside a run once made two fresh runs
// of one config pick different precisions.
#include "anvil/profile/peak.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace anvil::profile {
namespace {

double Bf16Ratio(ThreadPool& pool) {
  const PeakFlops peak = MeasurePeakFlops(pool);
  return peak.bf16_gflops / peak.f32_gflops;
}

// Threads that hold every core for 400 ms, then leave them for 150 ms: load
// in bursts longer than one trial, as a neighbouring test gives.
class BurstyLoad {
 public:
  explicit BurstyLoad(int threads) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this] {
        while (!stop_.load(std::memory_order_relaxed)) {
          const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
          while (std::chrono::steady_clock::now() < until) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(150));
        }
      });
    }
  }
  ~BurstyLoad() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST(Peak, Bf16ToF32RatioHoldsUnderBurstyLoad) {
  ThreadPool pool(2);
  const double quiet = Bf16Ratio(pool);
  if (BestIsa() != Isa::kAvx512 || !GetCpuFeatures().avx512_bf16) {
    EXPECT_EQ(quiet, 1.0);  // no bf16 dot: the bf16 peak is the f32 one
    GTEST_SKIP() << "no bf16 dot instruction on this tier";
  }
  // What must hold is the choice: "auto" takes bf16 above 1.25x. A bf16
  // trial slowed alone reads low (the old order read 1.11-1.29 for 2.0 in a
  // quarter of such runs), which flips a bf16 machine; an f32 trial slowed
  // alone reads high, which flips nothing there but a machine near the
  // threshold (none is: 2x where the dot is fast, 0.5x where it is not), and
  // does happen under load beyond this test's (a build beside it: +39%).
  // So a machine clearly on one side (a CPU near 1.25 could go either way)
  // must stay there with a 10% margin. A bound on loaded / quiet instead
  // (0.75) failed once in CI on a busy host while the choice held (2.00
  // quiet, 1.45 loaded); the old order's 1.11-1.29 fails this one too.
  BurstyLoad load(static_cast<int>(std::max(2u, std::thread::hardware_concurrency())));
  constexpr double kThreshold = kBf16ChoiceRatio, kMargin = 1.1;
  for (int i = 0; i < 6; ++i) {
    const double loaded = Bf16Ratio(pool);
    if (quiet > 1.6) {
      EXPECT_GT(loaded, kThreshold * kMargin) << "quiet " << quiet << ", loaded " << loaded;
    } else if (quiet < 1.0) {
      EXPECT_LT(loaded, kThreshold / kMargin) << "quiet " << quiet << ", loaded " << loaded;
    }
  }
}

}  // namespace
}  // namespace anvil::profile
