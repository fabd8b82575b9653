// Training-step throughput of configs/tiny.toml-sized models: one
// ForwardBackward of B=8 x T=256 per iteration, f32 and bf16, per recompute
// policy. Reports tokens/s and achieved model GFLOP/s (6N + 12 L T C per token).
#include <benchmark/benchmark.h>

#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/llama.h"

namespace anvil::model {
namespace {

void BM_TrainStep(benchmark::State& state) {
  const auto precision = static_cast<Precision>(state.range(0));
  const auto recompute = static_cast<Recompute>(state.range(1));
  constexpr int64_t kRows = 8, kSeq = 256;
  ThreadPool pool(0);
  kernels::KernelCtx ctx(pool);
  ModelConfig cfg;  // the defaults are configs/tiny.toml's
  Llama model(cfg, {.precision = precision, .recompute = recompute, .max_batch = kRows,
                    .max_seq_len = kSeq}, ctx);
  model.InitWeights(ctx, 1);
  std::vector<int32_t> tokens(kRows * kSeq), targets(kRows * kSeq);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>((i * 7919) % cfg.vocab_size);
    targets[i] = static_cast<int32_t>((i * 104729 + 1) % cfg.vocab_size);
  }
  const Batch batch{.rows = kRows, .seq_len = kSeq, .tokens = tokens, .targets = targets,
                    .cu_seqlens = {}, .positions = {}};
  model.ForwardBackward(ctx, batch, 0.0f);  // first touch of every page
  for (auto _ : state) {
    model.ZeroGrads(ctx);
    benchmark::DoNotOptimize(model.ForwardBackward(ctx, batch, 0.0f));
  }
  const double tokens_per_iter = static_cast<double>(kRows * kSeq);
  state.counters["tokens/s"] = benchmark::Counter(tokens_per_iter * state.iterations(),
                                                  benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      tokens_per_iter * cfg.FlopsPerToken(kSeq) * state.iterations() / 1e9,
      benchmark::Counter::kIsRate);
  state.counters["act_MiB"] = static_cast<double>(model.activation_high_water()) / (1 << 20);
  state.SetLabel(std::string(PrecisionName(precision)) + "/" + RecomputeName(recompute));
}
BENCHMARK(BM_TrainStep)
    ->ArgsProduct({{0, 1}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);

}  // namespace
}  // namespace anvil::model

BENCHMARK_MAIN();
