// Greedy / temperature, top-k, top-p sampling (see sampling.h).
#include "anvil/infer/sampling.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace anvil::infer {

Status SamplingConfig::Validate() const {
  if (!greedy && !(temperature > 0)) {
    return InvalidArgument(fmt::format("--temperature {}: must be positive (or use --greedy)",
                                       temperature));
  }
  if (top_k < 0) return InvalidArgument(fmt::format("--top-k {}: must be >= 0", top_k));
  if (!(top_p > 0 && top_p <= 1)) {
    return InvalidArgument(fmt::format("--top-p {}: must be in (0, 1]", top_p));
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingConfig& config)
    : config_(config), rng_(config.seed, RngPurpose::kSampling) {}

int32_t Sampler::Sample(std::span<const float> logits, uint64_t index) {
  const int32_t v = static_cast<int32_t>(logits.size());
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (config_.greedy) {
    int32_t best = 0;
    for (int32_t i = 1; i < v; ++i) {
      if (better(i, best)) best = i;
    }
    return best;
  }
  order_.resize(v);
  for (int32_t i = 0; i < v; ++i) order_[i] = i;
  const int32_t k = config_.top_k > 0 ? std::min(config_.top_k, v) : v;
  std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), better);
  order_.resize(k);
  // Softmax of logits / temperature over the kept tokens, in double.
  probs_.resize(k);
  const double inv_t = 1.0 / config_.temperature;
  const double top = logits[order_[0]] * inv_t;
  double sum = 0;
  for (int32_t i = 0; i < k; ++i) {
    probs_[i] = std::exp(logits[order_[i]] * inv_t - top);
    sum += probs_[i];
  }
  // Top-p: the shortest prefix (by descending probability) with mass >= p.
  int32_t keep = k;
  if (config_.top_p < 1) {
    double mass = 0;
    for (int32_t i = 0; i < k; ++i) {
      mass += probs_[i] / sum;
      if (mass >= config_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int32_t i = 0; i < keep; ++i) kept += probs_[i];
  const double u = rng_.Uniform(index) * kept;
  double acc = 0;
  for (int32_t i = 0; i < keep; ++i) {
    acc += probs_[i];
    if (u < acc) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace anvil::infer
