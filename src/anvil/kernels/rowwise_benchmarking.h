// Benchmark-only helpers shared by the row-wise kernel benchmarks: a context
// per thread count at the best tier, buffers touched once before timing, and
// the GB/s counter (bytes a kernel must read plus write, per second: its
// essential traffic, so re-reads that hit cache do not inflate it).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels::benchmarking {

// The best tier (or ANVIL_ISA) on a pool of `threads` threads, built once.
inline const KernelCtx& Ctx(int threads) {
  static ThreadPool* pools[2] = {new ThreadPool(1), new ThreadPool(2)};
  static KernelCtx* ctxs[2] = {nullptr, nullptr};
  if (ctxs[threads - 1] == nullptr) ctxs[threads - 1] = new KernelCtx(*pools[threads - 1]);
  return *ctxs[threads - 1];
}

// `n` elements of T, 64-byte aligned, filled with values in [lo, hi) (touched).
template <typename T>
class Buffer {
 public:
  explicit Buffer(int64_t n, uint32_t seed = 1, float lo = -1.0f, float hi = 1.0f)
      : storage_(static_cast<size_t>(n) * sizeof(T)), n_(n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, BF16>) {
        data()[i] = ToBF16(dist(rng));
      } else {
        data()[i] = static_cast<T>(dist(rng));
      }
    }
  }
  T* data() { return reinterpret_cast<T*>(storage_.data()); }
  int64_t size() const { return n_; }

 private:
  AlignedBuffer storage_;
  int64_t n_;
};

// Reports GB/s (1e9 bytes/s) from the bytes one iteration reads plus writes.
inline void SetBytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
  state.counters["threads"] = static_cast<double>(state.range(0));
}

}  // namespace anvil::kernels::benchmarking
