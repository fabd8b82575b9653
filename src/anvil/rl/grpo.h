// GRPO's arithmetic (DeepSeekMath's group-relative policy optimization, with
// DAPO's asymmetric clip and token-level aggregation): advantages from the
// rewards of a prompt's G samples, and per-token loss weights that make the
// model's cross-entropy backward the gradient of the clipped policy loss
// (PPO's too, with its own advantages: ppo.h).
//
//   A_i = (r_i - mean of the group) / (std of the group + eps)   (Dr. GRPO: no std)
//   rho_t = exp(logp_t - logp_old_t)
//   L = (1 / T) sum over the batch's T completion tokens of
//         -min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A) + beta k3_t
//   k3_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1     (KL to a frozen reference)
// Since d(cross-entropy_t) = -d logp_t, the gradient of L is that of
// sum_t w_t * cross-entropy_t with w_t = -dL/dlogp_t:
//   w_t = ([unclipped] rho_t A - beta (1 - exp(ref_t - logp_t))) / T
// where [unclipped] is 1 unless the clip binds (A >= 0 and rho > 1 + eps_high,
// or A < 0 and rho < 1 - eps_low). A group whose rewards are all equal has no
// signal: its samples get no advantage and are filtered out.
//
// Rollouts from another policy than the trainer's (a quantized sampler on
// purpose, or a stale one: asynchronous rollouts) are corrected by truncated
// importance sampling: token t's whole term, the policy part and the KL
// penalty, is weighted by c_t = min(exp(logp_old_t - behaviour_t), C)
// (C = tis_cap), the behaviour log-probability being the sampler's; so is
// the reported KL. With exact parity every c_t is exactly 1 and nothing
// changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace anvil::rl {

// Where the advantages come from: GRPO's group-relative one per sample,
// REINFORCE's reward minus a baseline, the mean reward of the step's samples
// (no scaling; a sample exactly at the baseline gets no gradient), or PPO's
// per token, by GAE from a critic's values (ppo.h). The clipped policy loss
// below is the same for all three.
enum class AdvantageKind : uint8_t { kGroup, kBatchBaseline, kGae };

struct PolicyLossConfig {
  AdvantageKind advantage = AdvantageKind::kGroup;
  double clip_low = 0.2;    // eps_low
  double clip_high = 0.28;  // eps_high (DAPO's clip-higher)
  double kl_coef = 0.0;     // beta; 0: no KL penalty
  bool scale_by_std = true;
  double tis_cap = 2.0;     // C of the truncated importance weights
  double std_eps = 1e-6;
};

struct Advantages {
  std::vector<double> value;  // per sample
  std::vector<bool> kept;     // false: its group's rewards were all equal
  int64_t filtered_groups = 0;
};

// rewards in groups of `group_size` consecutive samples.
Advantages GroupAdvantages(std::span<const double> rewards, int group_size,
                           const PolicyLossConfig& config);

struct PolicyTokenStats {
  double loss = 0;           // L
  double clip_fraction = 0;  // of tokens whose clip binds
  double kl = 0;             // mean c_t k3_t to the reference (0 without one), whatever kl_coef
  double tis_mean = 1;       // mean c_t (1 without behaviour log-probs)
  double tis_truncated = 0;  // share of tokens whose c_t was cut to C
};

// REINFORCE: r_i - mean of all the rewards (kept: those not at the mean).
Advantages BaselineAdvantages(std::span<const double> rewards);

// For T tokens: logp under the policy being trained, logp_old under the
// trainer's policy when the samples were drawn, ref under the reference
// (empty without one), behaviour under the sampler (empty: it is logp_old's
// policy), advantage per token; writes weights [T].
PolicyTokenStats PolicyTokenWeights(std::span<const double> logp, std::span<const double> logp_old,
                                std::span<const double> ref, std::span<const double> behaviour,
                                std::span<const double> advantage, const PolicyLossConfig& config,
                                std::span<float> weights);

}  // namespace anvil::rl
