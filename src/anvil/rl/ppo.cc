// PPO's advantages and value loss (ppo.h).
#include "anvil/rl/ppo.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "anvil/core/check.h"

namespace anvil::rl {

void Gae(std::span<const double> values, double reward, const PpoConfig& config,
         std::span<double> advantages, std::span<double> returns) {
  const size_t n = values.size();
  CHECK(advantages.size() == n && returns.size() == n);
  double next_value = 0, next_advantage = 0;
  for (size_t j = n; j-- > 0;) {
    const double r = j + 1 == n ? reward : 0.0;
    const double delta = r + config.gamma * next_value - values[j];
    advantages[j] = delta + config.gamma * config.lambda * next_advantage;
    returns[j] = advantages[j] + values[j];
    next_value = values[j];
    next_advantage = advantages[j];
  }
}

namespace {

struct Moments {
  double mean = 0, variance = 0;  // population variance
};

Moments MomentsOf(std::span<const double> x) {
  Moments m;
  if (x.empty()) return m;
  for (const double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  for (const double v : x) m.variance += (v - m.mean) * (v - m.mean);
  m.variance /= static_cast<double>(x.size());
  return m;
}

}  // namespace

void Whiten(std::span<double> advantages) {
  if (advantages.empty()) return;
  const Moments m = MomentsOf(advantages);
  const double scale = 1.0 / (std::sqrt(m.variance) + 1e-8);
  for (double& a : advantages) a = (a - m.mean) * scale;
}

double ExplainedVariance(std::span<const double> returns, std::span<const double> values) {
  CHECK_EQ(returns.size(), values.size());
  const double var_returns = MomentsOf(returns).variance;
  if (!(var_returns > 0)) return 0.0;
  std::vector<double> residual(returns.size());
  for (size_t k = 0; k < returns.size(); ++k) residual[k] = returns[k] - values[k];
  return 1.0 - MomentsOf(residual).variance / var_returns;
}

ValueLossStats ValueLoss(std::span<const double> values, std::span<const double> values_old,
                         std::span<const double> returns, const PpoConfig& config,
                         std::span<double> dv, int64_t total) {
  const size_t n = values.size();
  CHECK(values_old.size() == n && returns.size() == n && dv.size() == n);
  ValueLossStats s;
  if (n == 0) return s;
  const double count = static_cast<double>(total > 0 ? total : static_cast<int64_t>(n));
  const double scale = config.vf_coef / count;
  int64_t clipped = 0;
  for (size_t j = 0; j < n; ++j) {
    const double err = values[j] - returns[j];
    // Where the clip binds and the clipped term is the larger, the loss does
    // not depend on V_j: no gradient. (Decided on |V - V_old| first: V_old +
    // (V - V_old) need not round back to V, so the squares alone could let an
    // unclipped position lose its gradient to one ulp.)
    const double moved = values[j] - values_old[j];
    const bool binds = config.value_clip > 0 && std::fabs(moved) > config.value_clip;
    const double err_clipped =
        binds ? values_old[j] + std::clamp(moved, -config.value_clip, config.value_clip) - returns[j]
              : err;
    const bool clip_wins = binds && err_clipped * err_clipped > err * err;
    s.loss += 0.5 * std::max(err * err, err_clipped * err_clipped);
    clipped += clip_wins;
    dv[j] = clip_wins ? 0.0 : scale * err;
  }
  s.loss /= count;
  s.clip_fraction = static_cast<double>(clipped) / count;
  return s;
}

}  // namespace anvil::rl
