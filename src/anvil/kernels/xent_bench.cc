// Fused cross-entropy throughput, f32 and bf16 logits, vocab 128256 (Llama 3):
// forward (reads the logits once) and backward in place (reads and writes
// them), 4 rows (2 MiB f32: L2/L3) and 256 rows (131 MB f32: DRAM), 1 and 2 threads.
#include <benchmark/benchmark.h>

#include <vector>

#include "anvil/kernels/rowwise_benchmarking.h"
#include "anvil/kernels/xent.h"

namespace anvil::kernels {
namespace {

using benchmarking::Buffer;
using benchmarking::Ctx;
using benchmarking::SetBytes;

constexpr int64_t kVocab = 128256;

// Args: threads, rows.
template <typename T, bool kBackward>
void BM_CrossEntropy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int64_t rows = state.range(1);
  Buffer<T> logits(rows * kVocab, 1, -10, 10);
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 7919) % kVocab);
  std::vector<float> loss(rows), lse(rows);
  const KernelCtx& ctx = Ctx(threads);
  CrossEntropyForward(ctx, rows, kVocab, logits.data(), targets.data(), -100, 0.0f, loss.data(),
                      lse.data());
  for (auto _ : state) {
    if constexpr (kBackward) {
      // In place: the logits become gradients, which are valid logits again.
      CrossEntropyBackward(ctx, rows, kVocab, logits.data(), targets.data(), -100, 0.0f, lse.data(),
                           nullptr, 1.0f, logits.data());
    } else {
      CrossEntropyForward(ctx, rows, kVocab, logits.data(), targets.data(), -100, 0.0f, loss.data(),
                          lse.data());
    }
    benchmark::ClobberMemory();
  }
  SetBytes(state, (kBackward ? 2.0 : 1.0) * rows * kVocab * sizeof(T));
}

void Shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({threads, 4});
    b->Args({threads, 256});
  }
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_CrossEntropy<float, false>)->Apply(Shapes);
BENCHMARK(BM_CrossEntropy<BF16, false>)->Apply(Shapes);
BENCHMARK(BM_CrossEntropy<float, true>)->Apply(Shapes);
BENCHMARK(BM_CrossEntropy<BF16, true>)->Apply(Shapes);

}  // namespace
}  // namespace anvil::kernels

BENCHMARK_MAIN();
