// Next-token sampling from logits: greedy, or temperature + top-k + top-p
// with one addressed random number per generated position
// (RngStream(seed, kSampling).Uniform(position)), so a sample is a pure
// function of (logits, settings, seed, position). Ties break toward the lower
// token id.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/core/status.h"

namespace anvil::infer {

struct SamplingConfig {
  bool greedy = false;
  double temperature = 0.8;  // > 0
  int top_k = 50;            // 0: no limit
  double top_p = 0.95;       // in (0, 1]; 1: no limit
  uint64_t seed = 1;

  Status Validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingConfig& config);
  // The token at generated position `index` from logits [V].
  int32_t Sample(std::span<const float> logits, uint64_t index);

 private:
  SamplingConfig config_;
  RngStream rng_;
  std::vector<int32_t> order_;
  std::vector<double> probs_;
};

}  // namespace anvil::infer
