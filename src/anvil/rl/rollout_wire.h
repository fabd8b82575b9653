// A step's samples as three flat arrays, for messages between ranks: the
// rollout rank's replies (remote_rollouts.h) and the trainer ranks' shares
// (trainer_ranks.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/infer/rollout.h"

namespace anvil::rl {

struct SamplesWire {
  static constexpr int64_t kMetaFields = 4;  // request, sample, tokens, stop reason's code
  std::vector<int64_t> meta;                 // [samples, kMetaFields]
  std::vector<int32_t> tokens;               // every completion, in order
  std::vector<double> logprobs;              // one per token
};

SamplesWire EncodeSamples(std::span<const infer::RolloutSample> samples);
// The samples back, each request plus `request_offset` (a share's first
// prompt). The arrays must be as EncodeSamples made them (CHECKed).
std::vector<infer::RolloutSample> DecodeSamples(const SamplesWire& wire,
                                                int64_t request_offset = 0);

}  // namespace anvil::rl
