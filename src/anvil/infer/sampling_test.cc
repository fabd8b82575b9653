// Sampler: argument checks, greedy ties, top-k / top-p support, determinism in
// (seed, position), and the sampled frequencies against the softmax they
// should follow.
#include "anvil/infer/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace anvil::infer {
namespace {

// Logits whose softmax at temperature 1 is exactly `probs` (up to rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

SamplingConfig Plain(uint64_t seed = 7) {
  return {.greedy = false, .temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = seed};
}

TEST(Sampling, ValidateNamesTheBadFlag) {
  EXPECT_NE(SamplingConfig{.temperature = 0}.Validate().message().find("--temperature"),
            std::string::npos);
  EXPECT_TRUE((SamplingConfig{.greedy = true, .temperature = 0}.Validate().ok()));
  EXPECT_NE(SamplingConfig{.top_k = -1}.Validate().message().find("--top-k"), std::string::npos);
  EXPECT_NE(SamplingConfig{.top_p = 0}.Validate().message().find("--top-p"), std::string::npos);
  EXPECT_NE(SamplingConfig{.top_p = 1.5}.Validate().message().find("--top-p"), std::string::npos);
  EXPECT_TRUE(SamplingConfig{}.Validate().ok());
}

TEST(Sampling, GreedyTakesTheLargestAndBreaksTiesTowardTheLowerId) {
  Sampler greedy({.greedy = true});
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  for (uint64_t i = 0; i < 5; ++i) EXPECT_EQ(greedy.Sample(logits, i), 1);
  // top_k = 1 is greedy too, whatever the random number.
  SamplingConfig k1 = Plain();
  k1.top_k = 1;
  Sampler top1(k1);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(top1.Sample(logits, i), 1);
}

TEST(Sampling, PureFunctionOfSeedAndPosition) {
  const std::vector<float> logits = LogitsOf({0.1, 0.2, 0.3, 0.4});
  Sampler a(Plain(11)), b(Plain(11)), other_seed(Plain(12));
  std::vector<int32_t> forward, backward(200), seeded;
  for (uint64_t i = 0; i < 200; ++i) forward.push_back(a.Sample(logits, i));
  for (uint64_t i = 200; i-- > 0;) backward[i] = b.Sample(logits, i);  // order does not matter
  for (uint64_t i = 0; i < 200; ++i) seeded.push_back(other_seed.Sample(logits, i));
  EXPECT_EQ(forward, backward);
  EXPECT_NE(forward, seeded);
}

// Frequencies over many positions within 5 standard deviations of the target
// probabilities (n = 40000: sigma <= 0.0025).
void ExpectFrequencies(Sampler& s, const std::vector<float>& logits,
                       const std::vector<double>& want) {
  constexpr int kN = 40000;
  std::vector<int> count(logits.size(), 0);
  for (uint64_t i = 0; i < kN; ++i) ++count[s.Sample(logits, i)];
  for (size_t t = 0; t < want.size(); ++t) {
    const double sigma = std::sqrt(want[t] * (1 - want[t]) / kN);
    EXPECT_NEAR(static_cast<double>(count[t]) / kN, want[t], 5 * sigma + 1e-12) << "token " << t;
  }
}

TEST(Sampling, FollowsTheSoftmax) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  Sampler s(Plain());
  ExpectFrequencies(s, LogitsOf(probs), probs);
}

TEST(Sampling, TemperatureSharpens) {
  // At temperature 1/2 the probabilities go as p^2: 0.25, 0.09, ... renormalised.
  const std::vector<double> probs = {0.5, 0.3, 0.2};
  SamplingConfig c = Plain();
  c.temperature = 0.5;
  const double z = 0.25 + 0.09 + 0.04;
  Sampler s(c);
  ExpectFrequencies(s, LogitsOf(probs), {0.25 / z, 0.09 / z, 0.04 / z});
}

TEST(Sampling, TopKAndTopPRenormaliseOverTheKeptTokens) {
  const std::vector<double> probs = {0.5, 0.3, 0.15, 0.05};
  SamplingConfig k2 = Plain();
  k2.top_k = 2;  // keeps 0.5 and 0.3
  Sampler top_k(k2);
  ExpectFrequencies(top_k, LogitsOf(probs), {0.5 / 0.8, 0.3 / 0.8, 0, 0});
  SamplingConfig p9 = Plain();
  p9.top_p = 0.9;  // shortest prefix with mass >= 0.9: 0.5 + 0.3 + 0.15
  Sampler top_p(p9);
  ExpectFrequencies(top_p, LogitsOf(probs), {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0});
  SamplingConfig p5 = Plain();
  p5.top_p = 0.45;  // the first token alone (0.5) reaches it
  Sampler half(p5);
  ExpectFrequencies(half, LogitsOf(probs), {1, 0, 0, 0});
}

}  // namespace
}  // namespace anvil::infer
