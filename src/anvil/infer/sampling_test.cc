// Sampler: argument checks, greedy ties, top-k / top-p support, determinism in
// (seed, position), and the sampled frequencies against the softmax they
// should follow, and the draw against a reference walk of the running sums.
#include "anvil/infer/sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
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

// The least temperature still samples soundly: the largest logit every time,
// with log-probability 0; below it the flag is refused (at 1e-20 the shift's
// rounding once outgrew the exponents and the draws went wild).
TEST(Sampling, TheLeastTemperatureIsGreedyAndBelowItRefused) {
  SamplingConfig c = Plain();
  c.temperature = SamplingConfig::kMinTemperature;
  ASSERT_TRUE(c.Validate().ok());
  Sampler s(c);
  const std::vector<float> logits = {31.7f, -12.5f, 33.25f, 33.0f, 5.0f};
  for (uint64_t i = 0; i < 200; ++i) {
    const Sampled got = s.Sample(logits, 7, 0, i);
    EXPECT_EQ(got.token, 2);
    EXPECT_EQ(got.logprob, 0);
  }
  c.temperature = 1e-20;
  EXPECT_NE(c.Validate().message().find("use --greedy"), std::string::npos);
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


// The draw: the first token (in id order, whole vocabulary) whose running sum
// of exp(logit - max) exceeds u * total, the sums added one after another in
// double, as a reference walks them; against Sample over many draws, with
// ties, tokens whose probability underflows to 0 (flat stretches of the
// sums) and u close to the ends.
TEST(Sampling, DrawIsTheFirstRunningSumAboveU) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  constexpr int kVocab = 300;
  const SamplingConfig config{.temperature = 1.0, .top_k = 0, .top_p = 1.0, .seed = 11};
  Sampler sampler(config);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<float> logits(kVocab);
    for (float& x : logits) x = normal(rng);
    for (int i = 0; i < kVocab; i += 7) logits[i] = -1000.0f;  // exp underflows to 0
    for (int i = 3; i < kVocab; i += 11) logits[i] = logits[1];  // ties
    const float top = *std::max_element(logits.begin(), logits.end());
    std::vector<double> sums(kVocab);
    double sum = 0;
    for (int i = 0; i < kVocab; ++i) {
      sum += std::exp(static_cast<double>(logits[i]) * 1.0 - top);
      sums[i] = sum;
    }
    for (uint64_t position = 0; position < 50; ++position) {
      const RngStream stream(config.seed, RngPurpose::kSampling, 2, 1);
      const double u = stream.Uniform(position) * sum;
      int want = kVocab - 1;
      for (int i = 0; i < kVocab; ++i) {
        if (u < sums[i]) {
          want = i;
          break;
        }
      }
      ASSERT_EQ(sampler.Sample(logits, 2, 1, position).token, want)
          << "trial " << trial << " position " << position;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2000);
}

}  // namespace
}  // namespace anvil::infer
