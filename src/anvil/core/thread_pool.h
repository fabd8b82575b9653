// A fixed-size thread pool with a static, deterministic partition of work.
// No work stealing: which thread computes which index range depends only on
// (n, pool size), so results never depend on timing. Idle workers spin for a
// few microseconds and then sleep on a futex: on a 2-core machine a spinning
// idle worker would steal the core that has work.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "anvil/core/status.h"

namespace anvil {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread, which always takes part; so a pool
  // of 1 starts no workers. 0 means DefaultThreadCount().
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Runs fn(thread_index) once on each of the size() threads and returns when
  // all are done. Calls from inside a running job run inline (no nesting).
  template <typename Fn>
  void RunOnAll(Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    Dispatch([](void* f, int t) { (*static_cast<F*>(f))(t); }, const_cast<void*>(
        static_cast<const void*>(&fn)));
  }

  // Splits [0, n) into size() contiguous ranges (the first n % size() ranges one
  // longer) and calls fn(begin, end, thread_index) for each non-empty range.
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn) {
    if (n <= 0) return;
    RunOnAll([&](int t) {
      const auto [begin, end] = StaticRange(n, size_, t);
      if (begin < end) fn(begin, end, t);
    });
  }

  // The range thread t of `parts` gets in the static partition of [0, n).
  static std::pair<int64_t, int64_t> StaticRange(int64_t n, int parts, int t);

 private:
  using JobFn = void (*)(void*, int);
  void Dispatch(JobFn fn, void* arg);
  void WorkerLoop(int index);

  int size_;
  std::vector<std::thread> workers_;
  // A new job is published by bumping generation_; workers wake on its change.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers still running the current job
  JobFn job_fn_ = nullptr;
  void* job_arg_ = nullptr;
  bool stopping_ = false;
};

// ANVIL_THREADS if set (a positive integer), else the number of hardware threads.
// A malformed ANVIL_THREADS is a CHECK failure here; programs call
// CheckEnvironment() (core/environment.h) first to report it plainly.
int DefaultThreadCount();
// The value of ANVIL_THREADS: an integer in [1, 1024].
Result<int> ParseThreadCount(const char* text);

}  // namespace anvil
