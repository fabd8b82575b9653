// FP8 quantization throughput on a [4096, 3072] f32 activation (48 MiB: from
// DRAM) on 1 and 2 threads: tensorwise (the scaled cast; amax separately),
// DeepSeek-V3 1 x 128 row blocks, MXFP8 (32, OCP rule), the transposed
// column blocks of the weight-gradient operand, and 128 x 128 tiles. GB/s
// counts the f32 read plus the fp8 written (scales are < 1% of it).
#include <benchmark/benchmark.h>

#include <vector>

#include "anvil/kernels/quant.h"
#include "anvil/kernels/rowwise_benchmarking.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

constexpr int64_t kRows = 4096, kCols = 3072, kN = kRows * kCols;

Buffer<float>& Input() {
  static Buffer<float> x(kN, 1, -4.0f, 4.0f);
  return x;
}

Buffer<uint8_t>& Output() {
  static Buffer<uint8_t> q(kN, 2, 0.0f, 1.0f);
  return q;
}

void BM_Amax(benchmark::State& state) {
  const KernelCtx& ctx = Ctx(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Amax(ctx, kN, Input().data()));
  SetBytes(state, kN * 4.0);
}

void BM_QuantizeTensor(benchmark::State& state) {
  const KernelCtx& ctx = Ctx(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    QuantizeTensor(ctx, kN, Input().data(), 100.0f, Fp8Format::kE4M3, Output().data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, kN * 5.0);
}

template <BlockScale kRule, int kBlock, bool kTransposed>
void BM_QuantizeBlocks(benchmark::State& state) {
  const KernelCtx& ctx = Ctx(static_cast<int>(state.range(0)));
  const BlockQuant quant{.format = Fp8Format::kE4M3, .scale = kRule, .block = kBlock};
  std::vector<float> f32(kN / kBlock + kCols);
  std::vector<uint8_t> e8m0(kN / kBlock + kCols);
  const QuantScales scales = kRule == BlockScale::kAmax ? QuantScales{.f32 = f32.data()}
                                                        : QuantScales{.e8m0 = e8m0.data()};
  for (auto _ : state) {
    if (kTransposed) {
      QuantizeColumnsTransposed(ctx, kRows, kCols, Input().data(), quant, Output().data(), scales);
    } else {
      QuantizeRows(ctx, kRows, kCols, Input().data(), quant, Output().data(), scales);
    }
    benchmark::ClobberMemory();
  }
  SetBytes(state, kN * 5.0);
}

void BM_QuantizeTiles(benchmark::State& state) {
  const KernelCtx& ctx = Ctx(static_cast<int>(state.range(0)));
  std::vector<float> scales((kRows / 128) * (kCols / 128));
  for (auto _ : state) {
    QuantizeTiles(ctx, kRows, kCols, Input().data(), Fp8Format::kE4M3, 128, Output().data(),
                  scales.data());
    benchmark::ClobberMemory();
  }
  SetBytes(state, kN * 5.0);
}

void Threads(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Amax)->Apply(Threads);
BENCHMARK(BM_QuantizeTensor)->Apply(Threads);
BENCHMARK(BM_QuantizeBlocks<BlockScale::kAmax, 128, false>)
    ->Name("BM_QuantizeRows1x128")
    ->Apply(Threads);
BENCHMARK(BM_QuantizeBlocks<BlockScale::kMxOcp, 32, false>)
    ->Name("BM_QuantizeRowsMx32")
    ->Apply(Threads);
BENCHMARK(BM_QuantizeBlocks<BlockScale::kAmax, 128, true>)
    ->Name("BM_QuantizeColumnsT128x1")
    ->Apply(Threads);
BENCHMARK(BM_QuantizeBlocks<BlockScale::kMxOcp, 32, true>)
    ->Name("BM_QuantizeColumnsTMx32")
    ->Apply(Threads);
BENCHMARK(BM_QuantizeTiles)->Apply(Threads);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
