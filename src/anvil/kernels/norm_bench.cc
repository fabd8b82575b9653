// RMSNorm throughput: forward and backward, f32 and bf16, in cache (16 rows),
// L3 (512 rows) and DRAM (8192 rows) at dim 4096, and configs/small.toml's
// batch (2048 x 512), on 1 and 2 threads. GB/s counts x, y (forward)
// or x, dy, dx (backward) once each, plus weight and rstd.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <type_traits>

#include "anvil/kernels/norm.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

// Args: threads, rows, dim.
template <typename T>
void BM_RmsNormForward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t rows = state.range(1), dim = state.range(2);
  Buffer<T> x(rows * dim, 1), y(rows * dim, 2);
  Buffer<float> w(dim, 3), rstd(rows, 4);
  const KernelCtx& ctx = Ctx(threads);
  for (auto _ : state) {
    RmsNormForward(ctx, rows, dim, x.data(), w.data(), 1e-5f, y.data(), rstd.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, 2.0 * rows * dim * sizeof(T) + 4.0 * (dim + rows));
}

template <typename T>
void BM_RmsNormBackward(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t rows = state.range(1), dim = state.range(2);
  Buffer<T> x(rows * dim, 1), dy(rows * dim, 2), dx(rows * dim, 3);
  Buffer<float> w(dim, 4), rstd(rows, 5, 0.5f, 2.0f), dw(dim, 6);
  const KernelCtx& ctx = Ctx(threads);
  for (auto _ : state) {
    RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                    dw.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, 3.0 * rows * dim * sizeof(T) + 4.0 * (3 * dim + rows));
}

// The ceiling for the cases above: their bytes of x, y / dy, dx (not weight
// and rstd) through a plain loop on the same threads, as integers of T's
// width (y = x + 1: forward's traffic; dx = x + dy: backward's; an add, not
// a copy, which the compiler would make a memcpy with streaming stores).
template <typename T, bool kTwoInputs>
void BM_PlainLoop(benchmark::State& state) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;
  const int threads = static_cast<int>(state.range(0));
  const int64_t rows = state.range(1), dim = state.range(2);
  Buffer<U> x(rows * dim, 1, 0, 100), dy(kTwoInputs ? rows * dim : 1, 2, 0, 100),
      out(rows * dim, 3, 0, 100);
  const KernelCtx& ctx = Ctx(threads);
  for (auto _ : state) {
    ctx.pool().ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
      const U* a = x.data();
      const U* b = dy.data();
      U* o = out.data();
      for (int64_t i = begin * dim; i < end * dim; ++i) {
        o[i] = static_cast<U>(a[i] + (kTwoInputs ? b[i] : U{1}));
      }
    });
    benchmark::ClobberMemory();
  }
  SetBytes(state, (kTwoInputs ? 3.0 : 2.0) * rows * dim * sizeof(T));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({threads, 16, 4096});    // 256 KiB of f32 x: in L2
    b->Args({threads, 512, 4096});   // 8 MiB of f32 x: L3 (a training step's rows)
    b->Args({threads, 8192, 4096});  // 128 MiB of f32 x: DRAM
    b->Args({threads, 2048, 512});   // configs/small.toml's batch: 4 MiB of f32 x
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_RmsNormForward<float>)->Apply(Shapes);
BENCHMARK(BM_RmsNormForward<BF16>)->Apply(Shapes);
BENCHMARK(BM_RmsNormBackward<float>)->Apply(Shapes);
BENCHMARK(BM_RmsNormBackward<BF16>)->Apply(Shapes);
BENCHMARK(BM_PlainLoop<float, false>)->Apply(Shapes);
BENCHMARK(BM_PlainLoop<BF16, false>)->Apply(Shapes);
BENCHMARK(BM_PlainLoop<float, true>)->Apply(Shapes);
BENCHMARK(BM_PlainLoop<BF16, true>)->Apply(Shapes);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
