// Tests of the optimizer: LR schedule values, the global norm (thread-count
// invariant) and clipping, the weight-decay groups, and an AdamW state round
// trip that continues bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <numbers>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/optim/adamw.h"
#include "anvil/optim/schedule.h"

namespace anvil::optim {
namespace {

TEST(LrSchedule, WarmupThenCosineToMin) {
  OptimConfig c;
  c.lr = 1.0;
  c.min_lr_ratio = 0.1;
  c.warmup_steps = 10;
  const LrSchedule s(c, 110);
  EXPECT_DOUBLE_EQ(s.LrAt(0), 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(4), 0.5);
  EXPECT_DOUBLE_EQ(s.LrAt(9), 1.0);
  EXPECT_DOUBLE_EQ(s.LrAt(10), 1.0);  // cosine starts at the peak
  EXPECT_NEAR(s.LrAt(60), 0.1 + 0.9 * 0.5, 1e-12);  // halfway
  EXPECT_NEAR(s.LrAt(35), 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25)), 1e-12);
  EXPECT_DOUBLE_EQ(s.LrAt(110), 0.1);
  EXPECT_DOUBLE_EQ(s.LrAt(1000), 0.1);
  for (int64_t i = 11; i < 110; ++i) EXPECT_LE(s.LrAt(i), s.LrAt(i - 1));
}

TEST(LrSchedule, DecayStepsOverridesTotal) {
  OptimConfig c;
  c.lr = 2.0;
  c.min_lr_ratio = 0.0;
  c.warmup_steps = 0;
  c.decay_steps = 10;
  const LrSchedule s(c, 1000);
  EXPECT_DOUBLE_EQ(s.LrAt(0), 2.0);
  EXPECT_NEAR(s.LrAt(5), 1.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.LrAt(10), 0.0);
}

TEST(OptimConfig, ReadsKeysAndRejectsBadValues) {
  auto cfg = Config::FromString("[optim]\nlr = 0.01\nwarmup_steps = 5\n", "test.toml");
  ASSERT_TRUE(cfg.ok());
  auto oc = OptimConfig::FromConfig(*cfg);
  ASSERT_TRUE(oc.ok()) << oc.status().ToString();
  EXPECT_DOUBLE_EQ(oc->lr, 0.01);
  EXPECT_EQ(oc->warmup_steps, 5);
  EXPECT_TRUE(cfg->CheckAllUsed().ok());

  auto bad = Config::FromString("[optim]\nbeta2 = 1.5\n", "test.toml");
  ASSERT_TRUE(bad.ok());
  auto r = OptimConfig::FromConfig(*bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("optim.beta2"), std::string::npos) << r.status().message();
}

std::vector<float> RandomVector(int64_t n, uint64_t seed) {
  std::vector<float> x(n);
  RngStream(seed, RngPurpose::kTest).FillNormal(x, 0.0f, 1.0f);
  return x;
}

TEST(GlobalNorm, MatchesDoubleSumAndIsThreadInvariant) {
  const std::vector<float> x = RandomVector(3 * kNormChunk + 123, 7);
  double ref = 0;
  for (float f : x) ref += double{f} * f;
  ThreadPool one(1), two(2), three(3);
  const double n1 = GlobalNorm(one, x);
  EXPECT_NEAR(n1, std::sqrt(ref), 1e-9 * std::sqrt(ref));
  const double n2 = GlobalNorm(two, x), n3 = GlobalNorm(three, x);
  EXPECT_EQ(std::memcmp(&n1, &n2, sizeof n1), 0);
  EXPECT_EQ(std::memcmp(&n1, &n3, sizeof n1), 0);
}

TEST(ClipScale, ClipsOnlyAboveMax) {
  EXPECT_EQ(ClipScale(0.5, 1.0), 1.0f);
  EXPECT_EQ(ClipScale(10.0, 0.0), 1.0f);
  EXPECT_FLOAT_EQ(ClipScale(4.0, 1.0), static_cast<float>(1.0 / (4.0 + 1e-6)));
  // Clipped grads have norm max_norm (up to the 1e-6 guard).
  std::vector<float> g = RandomVector(1000, 3);
  ThreadPool pool(1);
  const double norm = GlobalNorm(pool, g);
  const float s = ClipScale(norm, 0.25);
  for (float& x : g) x *= s;
  EXPECT_NEAR(GlobalNorm(pool, g), 0.25, 1e-5);
}

// A 2-layer Llama's config (untied: the LM head is a tensor of its own).
model::ModelConfig SmallLlama() {
  model::ModelConfig mc;
  mc.tie_embeddings = false;
  mc.dim = 64;
  mc.n_layers = 2;
  mc.n_heads = 4;
  mc.n_kv_heads = 2;
  mc.ffn_dim = 48;
  mc.vocab_size = 64;
  mc.max_seq_len = 32;
  return mc;
}

TEST(LlamaParamGroups, DecayMatricesNotNorms) {
  const model::ModelConfig mc = SmallLlama();
  const model::LlamaParams params(mc, false);
  const std::vector<ParamGroup> groups = LlamaParamGroups(params);
  int64_t covered = 0;
  for (const ParamGroup& g : groups) covered += g.numel;
  EXPECT_LE(covered, params.size());
  for (const model::ParamInfo& p : params.params()) {
    bool found = false;
    for (const ParamGroup& g : groups) {
      if (p.offset >= g.offset && p.offset + p.numel <= g.offset + g.numel) {
        EXPECT_EQ(g.decay, p.shape.size() >= 2) << p.name;
        found = true;
      }
    }
    EXPECT_TRUE(found) << p.name;
  }
}

// A trunk without its LM head: the final norm and the untied LM head are in
// no group (AdamW leaves them as they are), every other tensor is, as before.
TEST(LlamaParamGroups, ATrunkLeavesItsHeadOut) {
  const model::ModelConfig mc = SmallLlama();
  const model::LlamaParams params(mc, false);
  const std::vector<ParamGroup> groups = LlamaParamGroups(params, /*lm_head=*/false);
  for (const model::ParamInfo& p : params.params()) {
    const bool head = p.kind == model::ParamKind::kFinalNorm || p.kind == model::ParamKind::kLmHead;
    int covering = 0, touching = 0;
    for (const ParamGroup& g : groups) {
      covering += p.offset >= g.offset && p.offset + p.numel <= g.offset + g.numel;
      touching += p.offset < g.offset + g.numel && g.offset < p.offset + p.numel;
    }
    EXPECT_EQ(touching, head ? 0 : 1) << p.name;
    EXPECT_EQ(covering, head ? 0 : 1) << p.name;
  }
}

TEST(AdamW, StateRoundTripContinuesBitwise) {
  const int64_t n = 1000;
  OptimConfig oc;
  oc.weight_decay = 0.1;
  ThreadPool pool(2);
  kernels::KernelCtx ctx(pool);
  const std::vector<ParamGroup> groups = {{0, 600, true}, {600, 400, false}};
  std::vector<float> w = RandomVector(n, 1);
  AdamW a(oc, groups, n);
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> g = RandomVector(n, 10 + s);
    a.Step(ctx, 1e-2, 0.5f, w, g, {});
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "anvil_optim_test_state.safetensors").string();
  ASSERT_TRUE(a.Save(path).ok());
  AdamW b(oc, groups, n);
  const Status st = b.Load(std::span<const std::string>(&path, 1));
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(b.step(), 3);
  std::vector<float> w2 = w;
  const std::vector<float> g = RandomVector(n, 99);
  a.Step(ctx, 5e-3, 1.0f, w, g, {});
  b.Step(ctx, 5e-3, 1.0f, w2, g, {});
  EXPECT_EQ(std::memcmp(w.data(), w2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.m().data(), b.m().data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.v().data(), b.v().data(), n * sizeof(float)), 0);

  AdamW wrong(oc, groups, n + 1);
  const Status bad = wrong.Load(std::span<const std::string>(&path, 1));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(path), std::string::npos) << bad.message();
  std::filesystem::remove(path);
}

// ZeRO's contract: shards updated separately are bitwise the whole-buffer
// update, and state saved under one sharding loads into any other.
TEST(AdamW, ShardsUpdateAndReshardBitwise) {
  const int64_t n = 5000;
  OptimConfig oc;
  oc.weight_decay = 0.1;
  ThreadPool pool(2);
  kernels::KernelCtx ctx(pool);
  const std::vector<ParamGroup> groups = {{0, 1700, true}, {1700, 1300, false}, {3000, 2000, true}};
  std::vector<float> whole_w = RandomVector(n, 1), shard_w = whole_w;
  AdamW whole(oc, groups, n);
  const Shard thirds[3] = {{0, 1600}, {1600, 3216}, {3216, n}};
  std::vector<std::unique_ptr<AdamW>> parts;
  for (const Shard& s : thirds) parts.push_back(std::make_unique<AdamW>(oc, groups, n, s));
  for (int s = 0; s < 3; ++s) {
    const std::vector<float> g = RandomVector(n, 10 + s);
    whole.Step(ctx, 1e-2, 0.5f, whole_w, g, {});
    for (auto& p : parts) p->Step(ctx, 1e-2, 0.5f, shard_w, g, {});
  }
  EXPECT_EQ(std::memcmp(whole_w.data(), shard_w.data(), n * sizeof(float)), 0);
  for (const auto& p : parts) {
    EXPECT_EQ(std::memcmp(p->m().data(), whole.m().data() + p->shard().begin,
                          p->shard().size() * sizeof(float)), 0);
  }
  const auto dir = std::filesystem::temp_directory_path();
  std::vector<std::string> paths;
  for (size_t i = 0; i < parts.size(); ++i) {
    paths.push_back((dir / ("anvil_optim_shard" + std::to_string(i) + ".safetensors")).string());
    ASSERT_TRUE(parts[i]->Save(paths.back()).ok());
  }
  AdamW halves[2] = {AdamW(oc, groups, n, {0, 2500}), AdamW(oc, groups, n, {2500, n})};
  AdamW rejoined(oc, groups, n);
  for (AdamW* a : {&halves[0], &halves[1], &rejoined}) {
    const Status st = a->Load(paths);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(a->step(), 3);
  }
  EXPECT_EQ(std::memcmp(rejoined.v().data(), whole.v().data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(halves[1].m().data(), whole.m().data() + 2500, 2500 * sizeof(float)), 0);
  // A missing shard leaves elements uncovered: an error, not zeros.
  const Status missing = rejoined.Load(std::span<const std::string>(paths.data(), 2));
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cover"), std::string::npos) << missing.message();
  for (const auto& p : paths) std::filesystem::remove(p);
}

TEST(GlobalNorm, ChunkSumsOfShardsGiveTheWholeNorm) {
  ThreadPool pool(2);
  const std::vector<float> x = RandomVector(3 * kNormChunk + 77, 5);
  std::vector<double> sums = ChunkSumsOfSquares(pool, std::span<const float>(x).subspan(0, kNormChunk * 2));
  const auto rest = ChunkSumsOfSquares(pool, std::span<const float>(x).subspan(kNormChunk * 2));
  sums.insert(sums.end(), rest.begin(), rest.end());
  const double whole = GlobalNorm(pool, x), sharded = NormFromChunkSums(sums);
  EXPECT_EQ(std::memcmp(&whole, &sharded, sizeof(double)), 0);
}

TEST(AdamW, NoDecayGroupLeavesZeroGradWeightUnchanged) {
  OptimConfig oc;
  oc.weight_decay = 0.5;
  ThreadPool pool(1);
  kernels::KernelCtx ctx(pool);
  std::vector<float> w = {1.0f, 1.0f};
  const std::vector<float> g = {0.0f, 0.0f};
  AdamW a(oc, {{0, 1, true}, {1, 1, false}}, 2);
  a.Step(ctx, 0.1, 1.0f, w, g, {});
  EXPECT_LT(w[0], 1.0f);   // decayed
  EXPECT_EQ(w[1], 1.0f);   // norm gain: no decay
}

}  // namespace
}  // namespace anvil::optim
