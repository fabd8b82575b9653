// Micro-benchmarks of the attention kernels on the dispatched tier: training
// forward and backward (FLOPs by FA2's convention, see bench/attention_bench.cc)
// and decode, one new row against a KV cache (bytes of K/V read per second).
// Shapes: 12 heads of 64, causal, f32 or bf16 inputs; threads: ANVIL_THREADS.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/attention.h"

namespace anvil::kernels {
namespace {

constexpr int kHeads = 12;
constexpr int kHeadDim = 64;

ThreadPool& Pool() {
  static ThreadPool pool;
  return pool;
}

// Random f32 (or bf16) values, touched once.
struct Buffer {
  Buffer(int64_t n, bool bf16) : buf(n * (bf16 ? 2 : 4)), bf16(bf16) {
    std::vector<float> f(n);
    RngStream(3, RngPurpose::kTest).FillNormal(f, 0.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i) {
      if (bf16) {
        reinterpret_cast<BF16*>(buf.data())[i] = ToBF16(f[i]);
      } else {
        reinterpret_cast<float*>(buf.data())[i] = f[i];
      }
    }
  }
  AttentionIn In() const { return {buf.data(), bf16 ? DType::kBF16 : DType::kF32, 0}; }
  float* F32() { return reinterpret_cast<float*>(buf.data()); }
  AlignedBuffer buf;
  bool bf16;
};

const AttentionDims kDims{kHeads, kHeads, kHeadDim, AttentionMask::kCausal, 0.0f};

// range(0): T, range(1): bf16 inputs.
void BM_AttentionForward(benchmark::State& state) {
  const int64_t t = state.range(0);
  const bool bf16 = state.range(1) != 0;
  const KernelCtx ctx(Pool(), BestIsa(), AttentionScratchBytes(kDims));
  const int64_t n = t * kHeads * kHeadDim;
  Buffer q(n, bf16), k(n, bf16), v(n, bf16), out(n, false), lse(t * kHeads, false);
  const std::vector<int32_t> cu = {0, static_cast<int32_t>(t)};
  for (auto _ : state) {
    AttentionForward(ctx, kDims, cu, q.In(), k.In(), v.In(), {out.F32(), DType::kF32, 0},
                     lse.F32());
  }
  const double flops = 2.0 * t * t * kHeadDim * kHeads;  // causal: half of 4 T^2 HD NH
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionForward)->ArgsProduct({{256, 1024, 4096}, {0, 1}})->UseRealTime();

void BM_AttentionBackward(benchmark::State& state) {
  const int64_t t = state.range(0);
  const KernelCtx ctx(Pool(), BestIsa(), AttentionScratchBytes(kDims));
  const int64_t n = t * kHeads * kHeadDim;
  Buffer q(n, false), k(n, false), v(n, false), out(n, false), dout(n, false), dq(n, false),
      dk(n, false), dv(n, false), lse(t * kHeads, false);
  const std::vector<int32_t> cu = {0, static_cast<int32_t>(t)};
  AttentionForward(ctx, kDims, cu, q.In(), k.In(), v.In(), {out.F32(), DType::kF32, 0}, lse.F32());
  for (auto _ : state) {
    AttentionBackward(ctx, kDims, cu, q.In(), k.In(), v.In(), out.In(), dout.In(), lse.F32(),
                      {dq.F32(), 0}, {dk.F32(), 0}, {dv.F32(), 0});
  }
  const double flops = 2.5 * 2.0 * t * t * kHeadDim * kHeads;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionBackward)->Arg(1024)->Arg(4096)->UseRealTime();

// One new row at position cache-1 (range(0) = cache length), range(1): bf16,
// range(2): kv heads (12: MHA, one query row per kv head; 4: GQA, 3 rows).
void BM_AttentionDecode(benchmark::State& state) {
  const int64_t len = state.range(0);
  const bool bf16 = state.range(1) != 0;
  const int kv_heads = static_cast<int>(state.range(2));
  const AttentionDims dims{kHeads, kv_heads, kHeadDim, AttentionMask::kCausal, 0.0f};
  const KernelCtx ctx(Pool(), BestIsa(), AttentionScratchBytes(dims));
  const int64_t n = len * kv_heads * kHeadDim;
  Buffer q(kHeads * kHeadDim, bf16), k(n, bf16), v(n, bf16), out(kHeads * kHeadDim, false),
      lse(kHeads, false);
  for (auto _ : state) {
    AttentionDecode(ctx, dims, len - 1, 1, q.In(), k.In(), v.In(), {out.F32(), DType::kF32, 0},
                    lse.F32());
  }
  state.counters["KV GB/s"] = benchmark::Counter(2.0 * n * (bf16 ? 2 : 4) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{1024, 16384}, {0, 1}, {kHeads, 4}})
    ->UseRealTime();

// A decode step of a batch, the rollout engine's shape: range(0) sequences of
// range(1) cached positions each (one new row apiece) in one call, bf16, 8
// heads on 4 kv heads (the small model's); range(2): caches in head blocks
// (as the decoder keeps them) or rows; range(3): caches of that many layers, one
// call a layer in turn (48: 96 MB at 64 positions, so each call's K/V come
// from DRAM, as in a rollout, where the weights stream between calls; 1: the
// caches stay in L2/L3). The caches are carved from one buffer (huge pages),
// each sequence's blocks together and extending to its last block's end (the
// decoder now keeps a layer's blocks block-major, which reads faster from
// DRAM; this layout stays for comparison with the figures taken with it).
void BM_AttentionDecodeBatch(benchmark::State& state) {
  const int64_t layers = state.range(3);
  const int64_t seqs = state.range(0) * layers, len = state.range(1);
  const bool head_blocks = state.range(2) != 0;
  const AttentionDims dims{8, 4, kHeadDim, AttentionMask::kCausal, 0.0f};
  const KernelCtx ctx(Pool(), BestIsa(), AttentionScratchBytes(dims));
  const int64_t q_row = 8 * kHeadDim, kv_row = 4 * kHeadDim;
  Buffer q(seqs * q_row, true), out(seqs * q_row, true);
  const int64_t cache = (len + kAttentionKvBlock - 1) / kAttentionKvBlock * kAttentionKvBlock *
                        kv_row;  // a sequence's K (or V) elements
  Buffer k(seqs * cache, true), v(seqs * cache, true);
  std::vector<AttentionDecodeRun> runs;
  for (int64_t s = 0; s < seqs; ++s) {
    const BF16* ks = reinterpret_cast<const BF16*>(k.buf.data()) + s * cache;
    const BF16* vs = reinterpret_cast<const BF16*>(v.buf.data()) + s * cache;
    runs.push_back({.pos = len - 1,
                    .n = 1,
                    .q = {reinterpret_cast<const BF16*>(q.buf.data()) + s * q_row, DType::kBF16, 0},
                    .k_cache = {ks, DType::kBF16, 0, nullptr, 0, head_blocks},
                    .v_cache = {vs, DType::kBF16, 0, nullptr, 0, head_blocks},
                    .out = {reinterpret_cast<BF16*>(out.buf.data()) + s * q_row, DType::kBF16, 0}});
  }
  const int64_t per_layer = state.range(0);
  int64_t layer = 0;
  for (auto _ : state) {
    AttentionDecodeBatch(ctx, dims, std::span(runs).subspan(layer * per_layer, per_layer));
    layer = (layer + 1) % layers;
  }
  state.counters["KV GB/s"] = benchmark::Counter(2.0 * per_layer * len * kv_row * 2 * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionDecodeBatch)->ArgsProduct({{32}, {64, 96}, {0, 1}, {1, 48}})->UseRealTime();

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
