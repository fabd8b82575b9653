// The rollout engine: results independent of the batch size (continuous
// batching with 1, 3 or 16 slots), the thread count and the order samples
// finish in; log-probabilities exactly those a trainer recomputes with the
// training forward (max |difference| = 0) in f32, bf16 and the FP8 recipes
// whose scales do not depend on the batch (fp8-block, mxfp8, fp8-delayed), with
// and without top-k/top-p; the samples of one prompt draw different tokens;
// eos, a stop string, max_new and the context's end stop a sample; each
// prompt may sample with settings of its own; bad prompts are refused.
#include "anvil/infer/rollout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "anvil/core/thread_pool.h"
#include "anvil/model/fp8_delayed_scaling.h"

namespace anvil::infer {
namespace {

model::ModelConfig Micro() {
  model::ModelConfig c;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 48;
  c.vocab_size = 64;
  c.max_seq_len = 32;
  return c;
}

std::vector<std::vector<int32_t>> Prompts(int count, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts(count);
  for (int i = 0; i < count; ++i) {
    prompts[i].resize(1 + (i * 5) % 9);
    for (int32_t& t : prompts[i]) t = static_cast<int32_t>(rng() % vocab);
  }
  return prompts;
}

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

struct Case {
  model::Precision precision;
  SamplingConfig sampling;
};

TEST(RolloutTest, BatchInvariantAndExactlyTheTrainersLogProbs) {
  SamplingConfig full{.temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = 7};
  SamplingConfig truncated{.temperature = 0.7, .top_k = 20, .top_p = 0.9, .seed = 7};
  const Case cases[] = {{model::Precision::kF32, full},
                        {model::Precision::kF32, truncated},
                        {model::Precision::kBF16, full},
                        {model::Precision::kFp8Block, full},
                        {model::Precision::kMxfp8, full},
                        {model::Precision::kFp8Delayed, full}};
  const auto prompts = Prompts(5, 3, 64);
  for (const Case& c : cases) {
    ThreadPool pool1(1), pool2(2);
    const kernels::KernelCtx ctx1(pool1), ctx2(pool2);
    // Several padded rows a forward: the trainer's batches.
    model::Llama model(Micro(), {.precision = c.precision, .max_batch = 4}, ctx2);
    model.InitWeights(ctx2, 11);
    if (model::Fp8DelayedScaling* delayed = model.fp8_delayed()) {
      // One recorded step: an amax history, so forwards use its fixed scales.
      const int64_t t_len = Micro().max_seq_len;
      std::vector<int32_t> tokens(4 * t_len), targets(4 * t_len);
      for (size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<int32_t>(i * 7 % 64);
        targets[i] = static_cast<int32_t>(i * 11 % 64);
      }
      delayed->BeginStep();
      model.ForwardBackward(
          ctx2, {.rows = 4, .seq_len = t_len, .tokens = tokens, .targets = targets}, 0.0f);
      delayed->EndStep();
    }
    std::vector<RolloutSample> first;
    for (const int64_t batch : {1, 3, 16}) {
      for (const kernels::KernelCtx* ctx : {&ctx1, &ctx2}) {
        RolloutOptions o{.max_batch = batch, .max_new = 12, .samples = 3, .eos = 5,
                         .sampling = c.sampling};
        RolloutEngine engine(model.forward_weights(), o);
        auto got = engine.Generate(*ctx, prompts);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ASSERT_EQ(got->size(), prompts.size() * 3);
        if (first.empty()) {
          first = *got;
          continue;
        }
        for (size_t i = 0; i < first.size(); ++i) {
          EXPECT_EQ((*got)[i].tokens, first[i].tokens) << "batch " << batch << " sample " << i;
          EXPECT_TRUE(SameBits((*got)[i].logprobs, first[i].logprobs)) << "batch " << batch;
          EXPECT_EQ((*got)[i].stop_reason, first[i].stop_reason);
        }
      }
    }
    // The trainer's side: the training forward over prompt + completion.
    double max_diff = 0;
    std::set<std::string> reasons;
    const auto recomputed = RecomputeLogProbs(model, ctx2, prompts, first, c.sampling);
    ASSERT_TRUE(recomputed.ok()) << recomputed.status().ToString();
    for (const RolloutSample& s : first) {
      const std::vector<double>& lp = (*recomputed)[&s - first.data()];
      ASSERT_EQ(lp.size(), s.logprobs.size());
      for (size_t j = 0; j < lp.size(); ++j) {
        max_diff = std::max(max_diff, std::fabs(lp[j] - s.logprobs[j]));
        ASSERT_TRUE(std::isfinite(s.logprobs[j]) && s.logprobs[j] <= 0);
      }
      EXPECT_TRUE(SameBits(lp, s.logprobs)) << "request " << s.request << " sample " << s.sample;
      reasons.insert(s.stop_reason);
    }
    EXPECT_EQ(max_diff, 0.0) << model::PrecisionName(c.precision);
    EXPECT_TRUE(reasons.count("eos") && reasons.count("max_new"));
    // G samples of a prompt are different draws.
    int differing = 0;
    for (size_t r = 0; r < prompts.size(); ++r) {
      differing += first[r * 3].tokens != first[r * 3 + 1].tokens;
    }
    EXPECT_GE(differing, 3) << model::PrecisionName(c.precision);
  }
}

// One engine across a change of the weights (an RL update): its packed copy
// follows them (f32, bf16: the bf16 copy refreshed), and the second call's
// log-probabilities are again the trainer's, bit for bit.
TEST(RolloutTest, AnEngineFollowsChangedWeights) {
  ThreadPool pool(2);
  const kernels::KernelCtx ctx(pool);
  const SamplingConfig sampling{.temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = 5};
  const auto prompts = Prompts(4, 3, 64);
  for (const model::Precision precision : {model::Precision::kF32, model::Precision::kBF16}) {
    model::Llama model(Micro(), {.precision = precision, .max_batch = 4}, ctx);
    model.InitWeights(ctx, 12);
    RolloutEngine engine(model.forward_weights(),
                         {.max_batch = 4, .max_new = 10, .samples = 2, .eos = -1,
                          .sampling = sampling});
    ASSERT_TRUE(engine.Generate(ctx, prompts).ok());
    for (float& w : model.params().weights()) w *= -0.75f;
    model.RefreshBf16Weights(ctx);
    auto got = engine.Generate(ctx, prompts);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const auto recomputed = RecomputeLogProbs(model, ctx, prompts, *got, sampling);
    ASSERT_TRUE(recomputed.ok()) << recomputed.status().ToString();
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_TRUE(SameBits((*recomputed)[i], (*got)[i].logprobs))
          << model::PrecisionName(precision) << " sample " << i;
    }
  }
}

// Each prompt samples with settings of its own (temperature, top-k, top-p,
// greedy, seed): its samples are those it draws alone with them, whatever
// the others', and the trainer's recomputation with the same settings gives
// their log-probabilities bit for bit.
TEST(RolloutTest, EachPromptSamplesWithItsOwnSettings) {
  ThreadPool pool(2);
  const kernels::KernelCtx ctx(pool);
  model::Llama model(Micro(), {.precision = model::Precision::kF32, .max_batch = 4}, ctx);
  model.InitWeights(ctx, 13);
  const auto prompts = Prompts(4, 5, 64);
  const std::vector<SamplingConfig> settings = {
      {.temperature = 0.7, .top_k = 20, .top_p = 0.9, .seed = 7},
      {.greedy = true, .seed = 7},
      {.temperature = 1.3, .top_k = 0, .top_p = 1.0, .seed = 9},
      {.temperature = 1.0, .top_k = 5, .top_p = 1.0, .seed = 7}};
  RolloutOptions o{.max_batch = 3,
                   .max_new = 12,
                   .samples = 2,
                   .eos = 5,
                   .sampling = {.temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = 7}};
  auto together =
      RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts, nullptr, 0, {}, settings);
  ASSERT_TRUE(together.ok()) << together.status().ToString();
  auto defaults = RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts);
  ASSERT_TRUE(defaults.ok());
  int changed = 0;
  for (size_t i = 0; i < together->size(); ++i) {
    changed += (*together)[i].tokens != (*defaults)[i].tokens;
  }
  EXPECT_GE(changed, 2) << "the prompts' own settings changed nothing";
  EXPECT_EQ((*together)[2].tokens, (*together)[3].tokens) << "greedy samples differ";
  for (size_t r = 0; r < prompts.size(); ++r) {
    RolloutOptions alone_options = o;
    alone_options.sampling = settings[r];
    auto alone = RolloutEngine(model.forward_weights(), alone_options)
                     .Generate(ctx, std::span(&prompts[r], 1), nullptr, static_cast<uint32_t>(r));
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    for (int g = 0; g < 2; ++g) {
      const RolloutSample& a = (*alone)[g];
      const RolloutSample& t = (*together)[r * 2 + g];
      EXPECT_EQ(a.tokens, t.tokens) << "prompt " << r << " sample " << g;
      EXPECT_TRUE(SameBits(a.logprobs, t.logprobs)) << "prompt " << r << " sample " << g;
    }
  }
  const auto recomputed = RecomputeLogProbs(model, ctx, prompts, *together, settings);
  ASSERT_TRUE(recomputed.ok()) << recomputed.status().ToString();
  for (size_t i = 0; i < together->size(); ++i) {
    EXPECT_TRUE(SameBits((*recomputed)[i], (*together)[i].logprobs)) << "sample " << i;
  }
  const std::vector<SamplingConfig> three(settings.begin(), settings.begin() + 3);
  EXPECT_FALSE(
      RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts, nullptr, 0, {}, three).ok());
  std::vector<SamplingConfig> bad = settings;
  bad[3].top_p = 0;
  const auto refused =
      RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts, nullptr, 0, {}, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("prompt 3's sampling"), std::string::npos)
      << refused.status().message();
}

// A paged cache (pages of 64 positions; prompts and samples cross pages)
// where a prompt's G samples share its prefill gives the contiguous cache's
// rollouts bit for bit, prefilling each prompt once.
TEST(RolloutTest, PagedCacheWithSharedPrefixesSameBits) {
  ThreadPool pool(2);
  const kernels::KernelCtx ctx(pool);
  model::ModelConfig cfg = Micro();
  cfg.max_seq_len = 160;
  for (const model::Precision precision : {model::Precision::kF32, model::Precision::kBF16}) {
    model::Llama model(cfg, {.precision = precision, .max_batch = 1}, ctx);
    model.InitWeights(ctx, 6);
    std::mt19937 rng(4);
    std::vector<std::vector<int32_t>> prompts(5);
    for (size_t i = 0; i < prompts.size(); ++i) {
      prompts[i].resize(40 + 13 * i);  // 40..92 positions: the longer ones cross a page
      for (int32_t& t : prompts[i]) t = static_cast<int32_t>(rng() % cfg.vocab_size);
    }
    RolloutOptions o{.max_batch = 4, .max_new = 40, .samples = 3, .eos = 5,
                     .sampling = {.temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = 3}};
    RolloutStats contiguous_stats, paged_stats;
    auto contiguous =
        RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts, &contiguous_stats);
    o.page_rows = 64;
    auto paged = RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts, &paged_stats);
    ASSERT_TRUE(contiguous.ok() && paged.ok());
    for (size_t i = 0; i < contiguous->size(); ++i) {
      EXPECT_EQ((*paged)[i].tokens, (*contiguous)[i].tokens) << i;
      EXPECT_TRUE(SameBits((*paged)[i].logprobs, (*contiguous)[i].logprobs)) << i;
    }
    int64_t prompt_tokens = 0;
    for (const auto& p : prompts) prompt_tokens += static_cast<int64_t>(p.size());
    EXPECT_EQ(contiguous_stats.prompt_tokens, 3 * prompt_tokens);
    EXPECT_EQ(paged_stats.prompt_tokens, prompt_tokens);  // one prefill a prompt

    // The engine's memory: its KV cache and scratch, and weights packed once
    // (at least one copy of the layers' and head's matrices, bf16 or wider,
    // where the tier packs: the scalar tier keeps no copy; the embedding and
    // the norms' weights are read in place).
    o.pack_weights = false;
    RolloutStats unpacked_stats;
    ASSERT_TRUE(
        RolloutEngine(model.forward_weights(), o).Generate(ctx, prompts, &unpacked_stats).ok());
    EXPECT_GT(unpacked_stats.engine_bytes, 0);
    const int64_t embed = int64_t{cfg.vocab_size} * cfg.dim;
    const int64_t norms = int64_t{2 * cfg.n_layers + 1} * cfg.dim;
    EXPECT_GE(paged_stats.engine_bytes - unpacked_stats.engine_bytes,
              ctx.isa() == Isa::kScalar ? 0 : 2 * (cfg.NumParams() - embed - norms));
  }
}

TEST(RolloutTest, StopStringsEndASampleAtTheTokenThatCompletesThem) {
  ThreadPool pool(2);
  const kernels::KernelCtx ctx(pool);
  model::Llama model(Micro(), {.max_batch = 1}, ctx);
  model.InitWeights(ctx, 3);
  // Even tokens read "x", odd ones "yz": the stop "xy" spans two tokens.
  auto token_text = [](int32_t t) { return std::string(t % 2 == 0 ? "x" : "yz"); };
  RolloutEngine engine(model.forward_weights(),
                       {.max_batch = 4,
                        .max_new = 12,
                        .samples = 4,
                        .eos = -1,
                        .sampling = {.temperature = 1, .top_k = 0, .top_p = 1},
                        .stop = {"xy"},
                        .token_text = token_text});
  auto r = engine.Generate(ctx, Prompts(6, 3, 64));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  int stopped = 0;
  for (const RolloutSample& s : *r) {
    std::string text, before_last;
    for (const int32_t t : s.tokens) {
      before_last = text;
      text += token_text(t);
    }
    const bool has = text.find("xy") != std::string::npos;
    if (s.stop_reason == "stop") {
      ++stopped;
      EXPECT_TRUE(has && before_last.find("xy") == std::string::npos) << text;
    } else {
      EXPECT_FALSE(has) << text;
      EXPECT_EQ(s.stop_reason, "max_new");
    }
  }
  EXPECT_GT(stopped, 3);
  RolloutEngine no_text(model.forward_weights(), {.samples = 1, .stop = {"xy"}});
  EXPECT_FALSE(no_text.Generate(ctx, Prompts(1, 3, 64)).ok());
  RolloutEngine empty(model.forward_weights(),
                      {.samples = 1, .stop = {""}, .token_text = token_text});
  EXPECT_FALSE(empty.Generate(ctx, Prompts(1, 3, 64)).ok());
}

TEST(RolloutTest, StopsAtTheContextAndRefusesBadPrompts) {
  ThreadPool pool(2);
  const kernels::KernelCtx ctx(pool);
  model::Llama model(Micro(), {.max_batch = 1}, ctx);
  model.InitWeights(ctx, 2);
  RolloutEngine engine(model.forward_weights(),
                       {.max_batch = 2, .max_new = 50, .samples = 1, .eos = -1});
  const std::vector<std::vector<int32_t>> near_end = {std::vector<int32_t>(30, 7)};
  auto r = engine.Generate(ctx, near_end);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].stop_reason, "max_seq_len");
  EXPECT_EQ((*r)[0].tokens.size(), 3u);  // positions 30 and 31 cached, the third has none
  const std::vector<std::vector<int32_t>> empty = {{}}, too_long = {std::vector<int32_t>(33, 1)},
                                          bad_id = {{1, 64}};
  for (const auto* p : {&empty, &too_long, &bad_id}) {
    EXPECT_FALSE(engine.Generate(ctx, *p).ok());
  }
}

}  // namespace
}  // namespace anvil::infer
