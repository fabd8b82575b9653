// GRPO advantages and token weights (grpo.h).
#include "anvil/rl/grpo.h"

#include <algorithm>
#include <cmath>

namespace anvil::rl {

Advantages GroupAdvantages(std::span<const double> rewards, int group_size,
                           const PolicyLossConfig& config) {
  Advantages a;
  a.value.assign(rewards.size(), 0.0);
  a.kept.assign(rewards.size(), false);
  for (size_t g0 = 0; g0 < rewards.size(); g0 += group_size) {
    const size_t g1 = std::min(rewards.size(), g0 + group_size);
    double mean = 0;
    for (size_t i = g0; i < g1; ++i) mean += rewards[i];
    mean /= static_cast<double>(g1 - g0);
    double var = 0;
    bool equal = true;
    for (size_t i = g0; i < g1; ++i) {
      var += (rewards[i] - mean) * (rewards[i] - mean);
      equal = equal && rewards[i] == rewards[g0];
    }
    if (equal) {
      ++a.filtered_groups;
      continue;
    }
    // The sample standard deviation (n - 1), as GRPO implementations use.
    const double std = std::sqrt(var / static_cast<double>(std::max<size_t>(1, g1 - g0 - 1)));
    const double scale = config.scale_by_std ? 1.0 / (std + config.std_eps) : 1.0;
    for (size_t i = g0; i < g1; ++i) {
      a.value[i] = (rewards[i] - mean) * scale;
      a.kept[i] = true;
    }
  }
  return a;
}

Advantages BaselineAdvantages(std::span<const double> rewards) {
  Advantages a;
  double mean = 0;
  for (const double r : rewards) mean += r;
  mean /= static_cast<double>(std::max<size_t>(1, rewards.size()));
  for (const double r : rewards) {
    a.value.push_back(r - mean);
    a.kept.push_back(r != mean);
  }
  return a;
}

PolicyTokenStats PolicyTokenWeights(std::span<const double> logp, std::span<const double> logp_old,
                                std::span<const double> ref, std::span<const double> behaviour,
                                std::span<const double> advantage, const PolicyLossConfig& config,
                                std::span<float> weights) {
  PolicyTokenStats s;
  const size_t n = logp.size();
  if (n == 0) return s;
  const double inv_n = 1.0 / static_cast<double>(n);
  int64_t clipped = 0, truncated = 0;
  double tis_sum = 0;
  for (size_t t = 0; t < n; ++t) {
    const double a = advantage[t];
    const double rho = std::exp(logp[t] - logp_old[t]);
    const double rho_clipped = std::clamp(rho, 1 - config.clip_low, 1 + config.clip_high);
    const bool binds = a >= 0 ? rho > 1 + config.clip_high : rho < 1 - config.clip_low;
    clipped += binds;
    double c = 1;
    if (!behaviour.empty()) {
      const double ratio = std::exp(logp_old[t] - behaviour[t]);
      c = std::min(ratio, config.tis_cap);
      truncated += ratio > config.tis_cap;
    }
    tis_sum += c;
    double w = binds ? 0.0 : c * rho * a;
    s.loss -= c * std::min(rho * a, rho_clipped * a);
    if (!ref.empty()) {
      const double d = ref[t] - logp[t];
      const double k3 = std::exp(d) - d - 1;
      // Weighted by c as the policy term: both estimate expectations under
      // the trainer's policy from tokens another one sampled.
      s.kl += c * k3;
      s.loss += c * config.kl_coef * k3;
      w -= c * config.kl_coef * (1 - std::exp(d));
    }
    weights[t] = static_cast<float>(w * inv_n);
  }
  s.loss *= inv_n;
  s.kl *= inv_n;
  s.clip_fraction = static_cast<double>(clipped) * inv_n;
  s.tis_mean = tis_sum * inv_n;
  s.tis_truncated = static_cast<double>(truncated) * inv_n;
  return s;
}

}  // namespace anvil::rl
