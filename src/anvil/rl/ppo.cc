// PPO's advantages and value loss (ppo.h).
#include "anvil/rl/ppo.h"

#include <algorithm>
#include <cmath>

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

void Whiten(std::span<double> advantages) {
  if (advantages.empty()) return;
  double mean = 0;
  for (const double a : advantages) mean += a;
  mean /= static_cast<double>(advantages.size());
  double var = 0;
  for (const double a : advantages) var += (a - mean) * (a - mean);
  var /= static_cast<double>(advantages.size());
  const double scale = 1.0 / (std::sqrt(var) + 1e-8);
  for (double& a : advantages) a = (a - mean) * scale;
}

ValueLossStats ValueLoss(std::span<const double> values, std::span<const double> values_old,
                         std::span<const double> returns, const PpoConfig& config,
                         std::span<double> dv) {
  const size_t n = values.size();
  CHECK(values_old.size() == n && returns.size() == n && dv.size() == n);
  ValueLossStats s;
  if (n == 0) return s;
  const double scale = config.vf_coef / static_cast<double>(n);
  int64_t clipped = 0;
  for (size_t j = 0; j < n; ++j) {
    const double err = values[j] - returns[j];
    double err_clipped = err;
    if (config.value_clip > 0) {
      const double moved =
          std::clamp(values[j] - values_old[j], -config.value_clip, config.value_clip);
      err_clipped = values_old[j] + moved - returns[j];
    }
    // Where the clipped term is the larger and the clip binds, the loss does
    // not depend on V_j: no gradient.
    const bool clip_wins = err_clipped * err_clipped > err * err;
    s.loss += 0.5 * std::max(err * err, err_clipped * err_clipped);
    clipped += clip_wins;
    dv[j] = clip_wins ? 0.0 : scale * err;
  }
  s.loss /= static_cast<double>(n);
  s.clip_fraction = static_cast<double>(clipped) / static_cast<double>(n);
  return s;
}

}  // namespace anvil::rl
