// Thread pool: coverage of the static partition, determinism, nesting, and
// that idle workers sleep rather than spin.
#include "anvil/core/thread_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <thread>
#include <vector>

namespace anvil {
namespace {

TEST(ThreadPool, StaticRangeCoversExactlyOnce) {
  for (int parts : {1, 2, 3, 7}) {
    for (int64_t n : {0, 1, 2, 5, 64, 1001}) {
      int64_t next = 0;
      for (int t = 0; t < parts; ++t) {
        const auto [b, e] = ThreadPool::StaticRange(n, parts, t);
        EXPECT_EQ(b, next);
        EXPECT_GE(e - b, n / parts);
        EXPECT_LE(e - b, n / parts + 1);
        next = e;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(ThreadPool, ParallelForVisitsEveryIndexOnceOnItsStaticThread) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    std::vector<int> owner(1000, -1);
    std::vector<int> hits(1000, 0);
    for (int rep = 0; rep < 50; ++rep) {
      pool.ParallelFor(1000, [&](int64_t b, int64_t e, int t) {
        for (int64_t i = b; i < e; ++i) {
          ++hits[i];
          if (rep == 0) owner[i] = t;
          EXPECT_EQ(owner[i], t);  // same index, same thread, every time
        }
      });
    }
    for (int h : hits) EXPECT_EQ(h, 50);
  }
}

TEST(ThreadPool, ManyBackToBackJobs) {
  ThreadPool pool(3);
  std::vector<int64_t> sums(3, 0);
  for (int rep = 0; rep < 5000; ++rep) {
    pool.RunOnAll([&](int t) { sums[t] += t + 1; });
  }
  EXPECT_EQ(sums[0], 5000);
  EXPECT_EQ(sums[1], 10000);
  EXPECT_EQ(sums[2], 15000);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(2);
  std::vector<int> inner_hits(2 * 10, 0);
  pool.RunOnAll([&](int outer) {
    pool.ParallelFor(10, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) ++inner_hits[outer * 10 + i];
    });
  });
  for (int h : inner_hits) EXPECT_EQ(h, 1);
}

double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

TEST(ThreadPool, IdleWorkersSleep) {
  ThreadPool pool(2);
  pool.RunOnAll([](int) {});
  const double before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double used = ProcessCpuSeconds() - before;
  // A spinning worker would burn ~0.2 s of CPU here; a parked one burns ~0.
  EXPECT_LT(used, 0.05) << "idle workers are spinning";
}

}  // namespace
}  // namespace anvil
