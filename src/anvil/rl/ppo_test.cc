// PPO's pieces: GAE against a hand computation and against its definition
// as a discounted sum of TD errors; the value loss's gradient and the value
// head's (weights and input) against central differences; the value head
// saves and loads its weights.
#include "anvil/rl/ppo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "anvil/rl/value_head.h"

namespace anvil::rl {
namespace {

TEST(PpoTest, GaeByHand) {
  const std::vector<double> v = {0.5, 0.2, -0.1};
  std::vector<double> a(3), ret(3);
  Gae(v, 1.0, {.gamma = 1.0, .lambda = 0.5}, a, ret);
  // delta = (0 + 0.2 - 0.5, 0 - 0.1 - 0.2, 1 + 0 + 0.1) = (-0.3, -0.3, 1.1)
  EXPECT_NEAR(a[2], 1.1, 1e-15);
  EXPECT_NEAR(a[1], -0.3 + 0.5 * 1.1, 1e-15);
  EXPECT_NEAR(a[0], -0.3 + 0.5 * a[1], 1e-15);
  for (int j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(ret[j], a[j] + v[j]);
  // lambda = 1, gamma = 1: the return of every position is the reward.
  Gae(v, 1.0, {.gamma = 1.0, .lambda = 1.0}, a, ret);
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(ret[j], 1.0, 1e-15);
}

TEST(PpoTest, GaeIsTheDiscountedSumOfTdErrors) {
  std::mt19937 rng(3);
  std::normal_distribution<double> nd;
  const int n = 9;
  std::vector<double> v(n), a(n), ret(n);
  for (double& x : v) x = nd(rng);
  const PpoConfig c{.gamma = 0.9, .lambda = 0.8};
  const double reward = 0.7;
  Gae(v, reward, c, a, ret);
  for (int j = 0; j < n; ++j) {
    double sum = 0, w = 1;
    for (int l = j; l < n; ++l) {
      const double next = l + 1 < n ? v[l + 1] : 0.0;
      const double r = l + 1 == n ? reward : 0.0;
      sum += w * (r + c.gamma * next - v[l]);
      w *= c.gamma * c.lambda;
    }
    EXPECT_NEAR(a[j], sum, 1e-12) << j;
  }
}

TEST(PpoTest, WhitenGivesMeanZeroStdOne) {
  std::vector<double> a = {1, 2, 3, 4, 10};
  Whiten(a);
  double mean = 0, var = 0;
  for (const double x : a) mean += x / 5;
  for (const double x : a) var += (x - mean) * (x - mean) / 5;
  EXPECT_NEAR(mean, 0, 1e-12);
  EXPECT_NEAR(var, 1, 1e-6);
}

double LossOf(const std::vector<double>& v, const std::vector<double>& old,
              const std::vector<double>& ret, const PpoConfig& c) {
  std::vector<double> dv(v.size());
  return c.vf_coef * ValueLoss(v, old, ret, c, dv).loss;
}

TEST(PpoTest, ValueLossGradientAndClip) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  const int n = 300;
  std::vector<double> v(n), old(n), ret(n), dv(n);
  for (int j = 0; j < n; ++j) {
    old[j] = u(rng);
    v[j] = old[j] + 0.5 * u(rng);  // moves up to 0.5: the 0.2 clip binds for some
    ret[j] = old[j] + u(rng);
  }
  const PpoConfig c{.value_clip = 0.2, .vf_coef = 0.3};
  const ValueLossStats s = ValueLoss(v, old, ret, c, dv);
  EXPECT_GT(s.clip_fraction, 0.05);
  EXPECT_LT(s.clip_fraction, 0.9);
  const double h = 1e-6;
  int checked = 0;
  for (int j = 0; j < n; ++j) {
    const double moved = v[j] - old[j];
    if (std::fabs(std::fabs(moved) - c.value_clip) < 1e-3) continue;  // the clip's kink
    // ...and where the two squared errors cross.
    const double e = v[j] - ret[j];
    const double ec = old[j] + std::clamp(moved, -c.value_clip, c.value_clip) - ret[j];
    if (std::fabs(moved) > c.value_clip && std::fabs(e * e - ec * ec) < 1e-4) continue;
    std::vector<double> p = v, m = v;
    p[j] += h;
    m[j] -= h;
    const double grad = (LossOf(p, old, ret, c) - LossOf(m, old, ret, c)) / (2 * h);
    EXPECT_NEAR(dv[j], grad, 1e-8 + 1e-5 * std::fabs(grad)) << j;
    ++checked;
  }
  EXPECT_GT(checked, 250);
  // Without clipping: the plain squared error.
  const PpoConfig plain{.value_clip = 0, .vf_coef = 1};
  const ValueLossStats p = ValueLoss(v, old, ret, plain, dv);
  EXPECT_EQ(p.clip_fraction, 0);
  EXPECT_NEAR(dv[0], (v[0] - ret[0]) / n, 1e-15);
}

TEST(PpoTest, ValueHeadGradientsAreCentralDifferences) {
  const int64_t dim = 24, n = 5;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> x(n * dim);
  for (float& v : x) v = 2.0f * nd(rng);
  ValueHead head(dim);
  for (float& p : head.params()) p = 0.3f * nd(rng);
  const std::vector<int64_t> rows = {4, 1, 3};
  const std::vector<double> dv = {0.7, -1.1, 0.4};
  // L = sum_k dv[k] v(rows[k]), in double through Values.
  auto loss = [&](const std::vector<float>& xs) {
    std::vector<double> out(rows.size());
    head.Values(xs.data(), rows, out);
    double l = 0;
    for (size_t k = 0; k < rows.size(); ++k) l += dv[k] * out[k];
    return l;
  };
  std::vector<float> dx(n * dim, 0.0f);
  head.ZeroGrads();
  head.Backward(x.data(), rows, dv, dx.data());
  // Input grads (f32 inputs: a step of 1e-2 on values of size ~2).
  const float h = 1e-2f;
  for (int64_t i = 0; i < n * dim; ++i) {
    std::vector<float> p = x, m = x;
    p[i] += h;
    m[i] -= h;
    const double grad = (loss(p) - loss(m)) / (static_cast<double>(p[i]) - m[i]);
    EXPECT_NEAR(dx[i], grad, 2e-4) << i;  // rows 0 and 2 are not scored: 0
  }
  // Weight and bias grads: v is linear in them, so differences are exact up to rounding.
  for (int64_t i = 0; i <= dim; ++i) {
    const float saved = head.params()[i];
    head.params()[i] = saved + 0.5f;
    const double up = loss(x);
    head.params()[i] = saved - 0.5f;
    const double down = loss(x);
    head.params()[i] = saved;
    EXPECT_NEAR(head.grads()[i], up - down, 1e-5) << i;
  }
}

TEST(PpoTest, ValueHeadSavesAndLoads) {
  ValueHead a(8), b(8), wrong(9);
  for (size_t i = 0; i < a.params().size(); ++i) a.params()[i] = 0.25f * static_cast<float>(i);
  const std::string path =
      (std::filesystem::temp_directory_path() / "anvil_value_head_test.safetensors").string();
  ASSERT_TRUE(a.Save(path).ok());
  ASSERT_TRUE(b.Load(path).ok());
  for (size_t i = 0; i < a.params().size(); ++i) EXPECT_EQ(a.params()[i], b.params()[i]);
  const Status s = wrong.Load(path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dim 8"), std::string::npos) << s.message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace anvil::rl
