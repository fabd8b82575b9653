// GEMM micro-benchmarks (Google Benchmark): the training and decode shapes on
// each tier and thread count. `anvil bench gemm` is the full comparison with
// peers and the peak; this is for quick iteration on one kernel.
#include <benchmark/benchmark.h>

#include <vector>

#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/quant.h"

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
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["B_GB/s"] = benchmark::Counter(static_cast<double>(k * n * sizeof(T)),
                                                benchmark::Counter::kIsIterationInvariantRate,
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

// GemmFp8, operands quantized once outside the timing. Args: m, n, k,
// threads, isa, recipe (0: DeepSeek-V3 1x128 A x 128x128-tile B, NN; 1:
// MXFP8, B [n, k]; 2: tensorwise NN), decode (0: to bf16, 1: to f32), and
// optionally B packed once (PackedFp8B; 0: decoded in every call).
void BM_GemmFp8(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  ThreadPool pool(static_cast<int>(state.range(3)));
  const Isa isa = static_cast<Isa>(state.range(4));
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const KernelCtx ctx(pool, isa);
  const int recipe = static_cast<int>(state.range(5));
  const std::vector<float> xa = Filled<float>(m * k, 1), xb = Filled<float>(k * n, 2);
  std::vector<uint8_t> qa(m * k), qb(k * n), ea(m * k / 32 + 1), eb(k * n / 32 + 1);
  std::vector<float> sa(m * k / 128 + 1), sb(k * n / 128 + 1);
  Fp8Operand a{.data = qa.data()}, b{.data = qb.data()};
  GemmArgs g{.m = m, .n = n, .k = k};
  if (recipe == 0) {
    QuantizeRows(ctx, m, k, xa.data(), {Fp8Format::kE4M3, BlockScale::kAmax, 128}, qa.data(),
                 {.f32 = sa.data()});
    QuantizeTiles(ctx, k, n, xb.data(), Fp8Format::kE4M3, 128, qb.data(), sb.data());
    a.scaling = Fp8Scaling::kRowBlocks;
    a.scales = sa.data();
    b.scaling = Fp8Scaling::kTiles;
    b.scales = sb.data();
  } else if (recipe == 1) {
    const BlockQuant mx{Fp8Format::kE4M3, BlockScale::kMxOcp, 32};
    QuantizeRows(ctx, m, k, xa.data(), mx, qa.data(), {.e8m0 = ea.data()});
    QuantizeRows(ctx, n, k, xb.data(), mx, qb.data(), {.e8m0 = eb.data()});  // B stored [n, k]
    a = {.data = qa.data(), .scaling = Fp8Scaling::kMx, .e8m0 = ea.data(), .block = 32};
    b = {.data = qb.data(), .scaling = Fp8Scaling::kMx, .e8m0 = eb.data(), .block = 32};
    g.trans_b = Trans::kT;
  } else {
    QuantizeTensor(ctx, m * k, xa.data(), 400.0f, Fp8Format::kE4M3, qa.data());
    QuantizeTensor(ctx, k * n, xb.data(), 400.0f, Fp8Format::kE4M3, qb.data());
    a.scale = b.scale = 1.0f / 400.0f;
  }
  std::vector<float> c(m * n);
  const Fp8Decode decode = state.range(6) == 0 ? Fp8Decode::kBf16 : Fp8Decode::kF32;
  const bool pack_once = state.range(7) != 0;
  const PackedFp8B packed = pack_once ? PackedFp8B(ctx, g, a, b, decode) : PackedFp8B();
  for (auto _ : state) {
    if (pack_once) {
      GemmFp8(ctx, g, a, packed, c.data());
    } else {
      GemmFp8(ctx, g, a, b, c.data(), decode);
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void Fp8Shapes(benchmark::internal::Benchmark* b) {
  for (int isa : {static_cast<int>(Isa::kAvx512), static_cast<int>(Isa::kAvx2)}) {
    for (int decode : {0, 1}) {
      for (int recipe : {0, 1, 2}) {
        b->Args({4096, 768, 768, 2, isa, recipe, decode, 0});
        b->Args({4096, 3072, 768, 2, isa, recipe, decode, 0});
        b->Args({4096, 768, 3072, 2, isa, recipe, decode, 0});
      }
    }
  }
}

// Decode shapes (an FP8 model's layers at batch 1, 8 and 32), B decoded in
// every call or packed once.
void Fp8DecodeShapes(benchmark::internal::Benchmark* b) {
  for (int isa : {static_cast<int>(Isa::kAvx512), static_cast<int>(Isa::kAvx2)}) {
    for (int recipe : {0, 1}) {
      for (int packed : {0, 1}) {
        for (int64_t m : {1, 8, 32}) b->Args({m, 768, 768, 2, isa, recipe, 1, packed});
      }
    }
  }
}

// Decode shapes with B packed once (PackedB) against the same calls packing
// or streaming B each time. Args: m, n, k, isa, trans_b, packed (0/1); 2 threads.
void BM_GemmPackedB(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  ThreadPool pool(2);
  const Isa isa = static_cast<Isa>(state.range(3));
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported");
    return;
  }
  const KernelCtx ctx(pool, isa);
  const GemmArgs g{.m = m, .n = n, .k = k, .trans_b = state.range(4) ? Trans::kT : Trans::kN};
  const std::vector<float> a = Filled<float>(m * k, 1), b = Filled<float>(k * n, 2);
  std::vector<float> c(m * n);
  const PackedB packed(ctx, g, b.data());
  for (auto _ : state) {
    if (state.range(5) != 0) {
      Gemm(ctx, g, a.data(), packed, c.data());
    } else {
      Gemm(ctx, g, a.data(), b.data(), c.data());
    }
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * m * n * k, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
}

void PackedShapes(benchmark::internal::Benchmark* b) {
  for (int isa : {static_cast<int>(Isa::kAvx512), static_cast<int>(Isa::kAvx2)}) {
    for (int packed : {0, 1}) {
      b->Args({32, 768, 256, isa, 0, packed});    // tiny's QKV at batch 32
      b->Args({32, 1376, 256, isa, 0, packed});   // tiny's gate/up
      b->Args({32, 8192, 256, isa, 1, packed});   // tiny's LM head (B stored [V, C])
      b->Args({32, 1024, 512, isa, 0, packed});   // small's QKV
      b->Args({32, 2752, 512, isa, 0, packed});   // small's gate/up
      b->Args({32, 16384, 512, isa, 1, packed});  // small's LM head
      b->Args({1, 8192, 256, isa, 1, packed});    // the head at batch 1
    }
  }
}

BENCHMARK(BM_Gemm<float>)->Apply(Shapes)->UseRealTime();
BENCHMARK(BM_GemmPackedB)->Apply(PackedShapes)->UseRealTime();
BENCHMARK(BM_Gemm<BF16>)->Apply(Shapes)->UseRealTime();
BENCHMARK(BM_GemmFp8)->Apply(Fp8Shapes)->UseRealTime();
BENCHMARK(BM_GemmFp8)->Apply(Fp8DecodeShapes)->UseRealTime();

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
