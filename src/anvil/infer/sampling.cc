// Greedy / temperature, top-k, top-p sampling (see sampling.h).
#include "anvil/infer/sampling.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "anvil/kernels/exp_sums.h"

namespace anvil::infer {

Status SamplingConfig::Validate() const {
  if (!greedy && !(temperature > 0)) {
    return InvalidArgument(fmt::format("--temperature {}: must be positive (or use --greedy)",
                                       temperature));
  }
  if (!greedy && temperature < kMinTemperature) {
    return InvalidArgument(fmt::format(
        "--temperature {}: below {}, which would be greedy but for rounding; use --greedy",
        temperature, kMinTemperature));
  }
  if (top_k < 0) return InvalidArgument(fmt::format("--top-k {}: must be >= 0", top_k));
  if (!(top_p > 0 && top_p <= 1)) {
    return InvalidArgument(fmt::format("--top-p {}: must be in (0, 1]", top_p));
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingConfig& config, Isa isa) : config_(config), isa_(isa) {}

void Sampler::Distribution(std::span<const float> logits) {
  const int32_t v = static_cast<int32_t>(logits.size());
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  order_.resize(v);
  for (int32_t i = 0; i < v; ++i) order_[i] = i;
  const bool top_k = !config_.greedy && config_.top_k > 0 && config_.top_k < v;
  const bool top_p = !config_.greedy && config_.top_p < 1;
  const int32_t k = top_k ? config_.top_k : v;
  int32_t best = 0;
  if (top_k || top_p) {
    // Truncation keeps the likeliest tokens: walk them sorted.
    std::partial_sort(order_.begin(), order_.begin() + k, order_.end(), better);
  } else {
    // Greedy, or the whole vocabulary: no order needed (a draw walks the
    // tokens in id order); the best one (by `better`: the first of the
    // largest logits) only shifts the exponentials.
    best = static_cast<int32_t>(kernels::FirstMaxIndex(isa_, v, logits.data()));
    if (config_.greedy) std::swap(order_[0], order_[best]);  // its pick
  }
  order_.resize(k);
  // Softmax of logits / temperature over the kept tokens, in double: their
  // exponentials and running sums (kernels::ExpRunningSums), over the logits
  // themselves when the order is id order, else gathered in the kept order.
  probs_.resize(k);
  cumulative_.resize(k);
  const double inv_t = config_.greedy ? 1.0 : 1.0 / config_.temperature;
  const double top = logits[top_k || top_p ? order_[0] : best] * inv_t;
  const float* kept_logits = logits.data();
  if (top_k || top_p || config_.greedy) {
    gathered_.resize(k);
    for (int32_t i = 0; i < k; ++i) gathered_[i] = logits[order_[i]];
    kept_logits = gathered_.data();
  }
  kernels::ExpRunningSums(isa_, k, kept_logits, inv_t, top, probs_.data(), cumulative_.data());
  // Top-p: the shortest prefix (by descending probability) with mass >= p.
  keep_ = k;
  if (top_p) {
    const double sum = cumulative_[k - 1];
    double mass = 0;
    for (int32_t i = 0; i < k; ++i) {
      mass += probs_[i] / sum;
      if (mass >= config_.top_p) {
        keep_ = i + 1;
        break;
      }
    }
  }
  kept_ = cumulative_[keep_ - 1];  // the kept tokens' probabilities added in order
}

Sampled Sampler::Sample(std::span<const float> logits, uint32_t request, uint32_t sample,
                        uint64_t position) {
  Distribution(logits);
  int32_t chosen = 0;  // the best; greedy's pick
  if (!config_.greedy) {
    const RngStream rng(config_.seed, RngPurpose::kSampling, request, sample);
    const double u = rng.Uniform(position) * kept_;
    // The first token whose running sum exceeds u (the sums never decrease;
    // none: the last), or, with a non-finite mass, the walk itself.
    const auto sums = std::span<const double>(cumulative_).first(static_cast<size_t>(keep_));
    if (std::isfinite(kept_)) {
      chosen = static_cast<int32_t>(std::upper_bound(sums.begin(), sums.end(), u) - sums.begin());
    } else {
      chosen = static_cast<int32_t>(std::find_if(sums.begin(), sums.end(),
                                                 [u](double acc) { return u < acc; }) -
                                    sums.begin());
    }
    chosen = std::min(chosen, keep_ - 1);
  }
  return {order_[chosen], std::log(probs_[chosen] / kept_)};
}

double Sampler::LogProb(std::span<const float> logits, int32_t token) {
  Distribution(logits);
  for (int32_t i = 0; i < keep_; ++i) {
    if (order_[i] == token) return std::log(probs_[i] / kept_);
  }
  return -std::numeric_limits<double>::infinity();
}

}  // namespace anvil::infer
