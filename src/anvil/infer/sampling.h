// Next-token sampling from logits: greedy, or temperature + top-k + top-p
// with one addressed random number per generated token: the stream of
// (seed, request, sample) at the token's generated position
// (RngStream(seed, kSampling, request, sample).Uniform(position)), so a
// token is a pure function of (logits, settings, seed, request, sample,
// position) and the samples of one prompt draw different numbers. Ties break
// toward the lower token id. The draw walks the kept tokens' cumulative
// probabilities: best first under top-k or top-p (which sort them), in token
// id order over the whole vocabulary (no sort: RL samples there).
//
// Each sampled token comes with its log-probability under the distribution
// it was drawn from: softmax(logits / temperature) over the tokens top-k and
// top-p keep, renormalized (-inf outside them); greedy reports the plain
// softmax's (temperature 1, every token). LogProb recomputes it from logits
// through the same arithmetic, so equal logits give equal bits. The
// exponentials and their running sums are kernels::ExpRunningSums: the same
// bits on every SIMD tier and build, so the tier only sets the speed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/core/cpu_features.h"
#include "anvil/core/rng.h"
#include "anvil/core/status.h"

namespace anvil::infer {

struct SamplingConfig {
  // The least temperature: the exponentials are shifted by the largest
  // logit / temperature rounded in double, whose rounding error grows as
  // |logit| / temperature x 2^-53; at 1e-20 it outgrows the exponents and
  // the draws go wild. Down here sampling is greedy but for that rounding.
  static constexpr double kMinTemperature = 1e-6;

  bool greedy = false;
  double temperature = 0.8;  // >= kMinTemperature
  int top_k = 50;            // 0: no limit
  double top_p = 0.95;       // in (0, 1]; 1: no limit
  uint64_t seed = 1;

  Status Validate() const;
};

struct Sampled {
  int32_t token = 0;
  double logprob = 0;
};

class Sampler {
 public:
  // `isa` only chooses the speed: every tier draws the same tokens.
  explicit Sampler(const SamplingConfig& config, Isa isa = BestIsa());
  // The token at generated position `position` of sample `sample` of
  // request `request`, from logits [V].
  Sampled Sample(std::span<const float> logits, uint32_t request, uint32_t sample,
                 uint64_t position);
  // Request 0, sample 0 (one generation).
  int32_t Sample(std::span<const float> logits, uint64_t position) {
    return Sample(logits, 0, 0, position).token;
  }
  // The log-probability Sample reports for `token` given these logits.
  double LogProb(std::span<const float> logits, int32_t token);
  // Other settings from here on (a request with settings of its own: the
  // rollout engine's samplers serve every request); they must be valid.
  void SetConfig(const SamplingConfig& config) { config_ = config; }

 private:
  // The kept tokens (order_[0, keep_): best first when truncated, else in id
  // order with greedy's pick swapped to the front), their unnormalized
  // probabilities probs_ and its running sums cumulative_ (mass kept_).
  void Distribution(std::span<const float> logits);

  SamplingConfig config_;
  Isa isa_;
  std::vector<int32_t> order_;
  std::vector<float> gathered_;  // the kept tokens' logits, when not in id order
  std::vector<double> probs_;
  // cumulative_[i] = ((probs_[0] + probs_[1]) + ...) + probs_[i], in that
  // order: the sums a draw walks, found by binary search instead of added
  // again one after another (the same doubles, so the same token).
  std::vector<double> cumulative_;
  int32_t keep_ = 0;
  double kept_ = 0;
};

}  // namespace anvil::infer
