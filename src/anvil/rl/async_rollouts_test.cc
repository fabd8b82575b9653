// Asynchronous rollouts: samples drawn from the snapshot on the rollout
// thread carry log-probabilities that the snapshot's training forward
// reproduces bit for bit (so the trainer's importance ratio to them is
// exact); the snapshot is a copy, untouched by later changes to the policy
// until the next Snapshot; a saved snapshot loads back to the same samples;
// a cancelled draw is dropped and leaves the next one unchanged.
#include "anvil/rl/async_rollouts.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "anvil/rl/policy_testing.h"

namespace anvil::rl {
namespace {

Policy MicroPolicy() {
  auto p = testing::NewMicroPolicy();
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(*p);
}

TEST(AsyncRolloutsTest, SamplesAreTheSnapshotsExactly) {
  Policy policy = MicroPolicy();
  const infer::RolloutOptions options{
      .max_batch = 6,
      .max_new = 6,
      .samples = 3,
      .eos = policy.eos(),
      .sampling = {.temperature = 1, .top_k = 0, .top_p = 1, .seed = 9}};
  AsyncRollouts async(policy, options, model::WeightQuant::kNone, 1);
  const std::vector<std::vector<int32_t>> prompts = {policy.PromptTokens("12+34="),
                                                     policy.PromptTokens("7+8=")};
  async.Start(prompts, 5, 1);
  // The trainer moves the live weights meanwhile: the draw does not see it.
  for (float& w : policy.llama->params().weights()) w *= 1.5f;
  auto drawn = async.Wait();
  ASSERT_TRUE(drawn.ok()) << drawn.status().ToString();
  EXPECT_EQ(drawn->staleness, 1);
  ASSERT_EQ(drawn->samples.size(), 6u);
  // The trainer's forward with the snapshot's weights.
  model::Llama trainer(policy.config, {.max_batch = 2}, *policy.ctx);
  const std::span<const float> snap = async.snapshot().params().weights();
  std::copy(snap.begin(), snap.end(), trainer.params().weights().begin());
  auto exact =
      infer::RecomputeLogProbs(trainer, *policy.ctx, prompts, drawn->samples, options.sampling);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  auto live = infer::RecomputeLogProbs(*policy.llama, *policy.ctx, prompts, drawn->samples,
                                       options.sampling);
  ASSERT_TRUE(live.ok());
  double live_diff = 0;
  for (size_t i = 0; i < drawn->samples.size(); ++i) {
    const std::vector<double>& lp = drawn->samples[i].logprobs;
    ASSERT_EQ((*exact)[i].size(), lp.size());
    for (size_t j = 0; j < lp.size(); ++j) {
      EXPECT_EQ((*exact)[i][j], lp[j]) << "sample " << i << " token " << j;
      live_diff = std::max(live_diff, std::fabs((*live)[i][j] - lp[j]));
    }
  }
  EXPECT_GT(live_diff, 1e-3);  // the live policy moved away

  // Saved and loaded into another engine's snapshot: the same draw again.
  const std::string path =
      (std::filesystem::temp_directory_path() / "anvil_async_snapshot_test.safetensors").string();
  ASSERT_TRUE(async.SaveSnapshot(path).ok());
  AsyncRollouts other(policy, options, model::WeightQuant::kNone, 2);  // the moved weights
  ASSERT_TRUE(other.LoadSnapshot(path).ok());
  other.Start(prompts, 5, 1);
  auto again = other.Wait();
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < drawn->samples.size(); ++i) {
    EXPECT_EQ(again->samples[i].tokens, drawn->samples[i].tokens) << i;
    EXPECT_EQ(again->samples[i].logprobs, drawn->samples[i].logprobs) << i;
  }
  std::filesystem::remove(path);
}

TEST(AsyncRolloutsTest, CancelDropsTheDrawAndTheNextIsUnchanged) {
  Policy policy = MicroPolicy();
  const infer::RolloutOptions options{
      .max_batch = 4,
      .max_new = 8,
      .samples = 2,
      .eos = -1,
      .sampling = {.temperature = 1, .top_k = 0, .top_p = 1, .seed = 4}};
  const std::vector<std::vector<int32_t>> prompts = {policy.PromptTokens("3+4="),
                                                     policy.PromptTokens("11+9=")};
  // The engine stops at its next decode step once asked to.
  infer::RolloutEngine engine(policy.llama->forward_weights(), options);
  auto stopped = engine.Generate(*policy.ctx, prompts, nullptr, 0, [] { return true; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);

  AsyncRollouts async(policy, options, model::WeightQuant::kNone, 1);
  async.Cancel();  // nothing in flight: nothing to do
  async.Start(prompts, 2, 1);
  async.Cancel();
  EXPECT_FALSE(async.in_flight());
  async.Start(prompts, 2, 1);
  auto drawn = async.Wait();
  ASSERT_TRUE(drawn.ok()) << drawn.status().ToString();
  AsyncRollouts fresh(policy, options, model::WeightQuant::kNone, 1);
  fresh.Start(prompts, 2, 1);
  auto expected = fresh.Wait();
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(drawn->samples.size(), expected->samples.size());
  for (size_t i = 0; i < drawn->samples.size(); ++i) {
    EXPECT_EQ(drawn->samples[i].tokens, expected->samples[i].tokens) << i;
    EXPECT_EQ(drawn->samples[i].logprobs, expected->samples[i].logprobs) << i;
  }
}

}  // namespace
}  // namespace anvil::rl
