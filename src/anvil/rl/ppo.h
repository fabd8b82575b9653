// PPO's arithmetic beside the clipped policy loss it shares with GRPO
// (grpo.h): per-token advantages by generalized advantage estimation from a
// critic's values (value_head.h), and the clipped value loss.
//
// A completion of L tokens is one episode whose reward comes at its end:
// r_j = 0 for j < L - 1, r_{L-1} = R; the state before token j is scored
// V_j (V_L = 0: every end is terminal, a cut one included). Then
//   delta_j = r_j + gamma V_{j+1} - V_j,   A_j = delta_j + gamma lambda A_{j+1},
//   return_j = A_j + V_j,
// and the value loss of a position, with V_old the values the advantages
// came from (PPO2's value clipping):
//   l_j = 1/2 max((V_j - return_j)^2, (V_old_j + clip(V_j - V_old_j, -c, c) - return_j)^2).
#pragma once

#include <cstdint>
#include <span>

namespace anvil::rl {

struct PpoConfig {
  double gamma = 1.0;       // discount per token
  double lambda = 0.95;     // GAE's
  double value_clip = 0.2;  // c; 0: no clipping
  double vf_coef = 0.1;     // the value loss's weight in the trunk's loss
  bool whiten = true;       // advantages to mean 0, std 1 over a step's tokens
};

// One completion: `values` [L] (V_0..V_{L-1}) and its reward; writes
// advantages and returns [L].
void Gae(std::span<const double> values, double reward, const PpoConfig& config,
         std::span<double> advantages, std::span<double> returns);

// Advantages to mean 0 and std 1 (population std + 1e-8), in place.
void Whiten(std::span<double> advantages);

// 1 - Var(returns - values) / Var(returns): how much of the returns' spread
// the critic explains (1: all; 0 or less: none; 0 when the returns are equal).
double ExplainedVariance(std::span<const double> returns, std::span<const double> values);

struct ValueLossStats {
  double loss = 0;           // mean l_j over the positions (before vf_coef)
  double clip_fraction = 0;  // of positions where the clipped term is the larger
};

// The value loss of T positions and its gradient dv [T] of
// vf_coef * (1 / total) * sum of l_j. `total`: the positions of the whole
// update when these are one micro-batch's share of it (0: T); the stats are
// then this share's part of the update's means.
ValueLossStats ValueLoss(std::span<const double> values, std::span<const double> values_old,
                         std::span<const double> returns, const PpoConfig& config,
                         std::span<double> dv, int64_t total = 0);

}  // namespace anvil::rl
