// Tokenizer training and encoding on the full Brown corpus, the `anvil
// prepare` workload: seconds to train an 8192-token vocabulary, and encode
// throughput (MB of text per second, one thread, cached Encoder). Skips when
// the corpus is not installed (scripts/setup.sh).
#include <benchmark/benchmark.h>

#include <string_view>
#include <vector>

#include "anvil/core/thread_pool.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/corpus.h"

namespace anvil::data {
namespace {

const Corpus* Brown() {
  static const Corpus* corpus = []() -> const Corpus* {
    auto c = ReadCorpus("brown");
    return c.ok() ? new Corpus(std::move(c).value()) : nullptr;
  }();
  return corpus;
}

std::vector<std::string_view> Texts(const Corpus& c) {
  std::vector<std::string_view> out;
  for (const Document& d : c.documents) out.push_back(d.text);
  return out;
}

void BM_TrainBrown(benchmark::State& state) {
  const Corpus* corpus = Brown();
  if (corpus == nullptr) {
    state.SkipWithError("Brown corpus not installed: run scripts/setup.sh");
    return;
  }
  const std::vector<std::string_view> texts = Texts(*corpus);
  ThreadPool pool(static_cast<int>(state.range(0)));
  BpeTrainOptions options;
  options.vocab_size = static_cast<int>(state.range(1));
  BpeTrainStats stats;
  for (auto _ : state) {
    auto tok = TrainBpe(texts, options, pool, &stats);
    if (!tok.ok()) state.SkipWithError(tok.status().ToString().c_str());
  }
  state.counters["MB"] = corpus->bytes / 1e6;
  state.counters["count_s"] = stats.count_seconds;
  state.counters["merge_s"] = stats.merge_seconds;
  state.counters["words"] = static_cast<double>(stats.unique_words);
}
BENCHMARK(BM_TrainBrown)
    ->Args({2, 8192})
    ->Args({1, 8192})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

void BM_EncodeBrown(benchmark::State& state) {
  const Corpus* corpus = Brown();
  if (corpus == nullptr) {
    state.SkipWithError("Brown corpus not installed: run scripts/setup.sh");
    return;
  }
  ThreadPool pool(2);
  BpeTrainOptions options;
  options.vocab_size = 8192;
  auto tok = TrainBpe(Texts(*corpus), options, pool);
  if (!tok.ok()) {
    state.SkipWithError(tok.status().ToString().c_str());
    return;
  }
  std::vector<uint32_t> ids;
  int64_t tokens = 0;
  for (auto _ : state) {
    Encoder encoder(*tok);  // a cold cache each pass, as in prepare
    tokens = 0;
    for (const Document& d : corpus->documents) {
      ids.clear();
      encoder.Encode(d.text, &ids);
      tokens += static_cast<int64_t>(ids.size());
    }
  }
  state.SetBytesProcessed(state.iterations() * corpus->bytes);
  state.counters["bytes_per_token"] = static_cast<double>(corpus->bytes) / tokens;
}
BENCHMARK(BM_EncodeBrown)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace anvil::data

BENCHMARK_MAIN();
