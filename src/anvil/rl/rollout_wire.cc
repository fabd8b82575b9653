// Samples as flat arrays (rollout_wire.h).
#include "anvil/rl/rollout_wire.h"

#include <array>
#include <string>

#include "anvil/core/check.h"

namespace anvil::rl {
namespace {

constexpr std::array<const char*, 4> kStopReasons = {"eos", "stop", "max_new", "max_seq_len"};

int64_t StopCode(const std::string& reason) {
  for (size_t i = 0; i < kStopReasons.size(); ++i) {
    if (reason == kStopReasons[i]) return static_cast<int64_t>(i);
  }
  CHECK(false) << "a rollout stop reason without a code: " << reason;
  return -1;
}

}  // namespace

SamplesWire EncodeSamples(std::span<const infer::RolloutSample> samples) {
  SamplesWire w;
  for (const infer::RolloutSample& s : samples) {
    w.meta.insert(w.meta.end(), {s.request, s.sample, static_cast<int64_t>(s.tokens.size()),
                                 StopCode(s.stop_reason)});
    w.tokens.insert(w.tokens.end(), s.tokens.begin(), s.tokens.end());
    w.logprobs.insert(w.logprobs.end(), s.logprobs.begin(), s.logprobs.end());
  }
  return w;
}

std::vector<infer::RolloutSample> DecodeSamples(const SamplesWire& wire, int64_t request_offset) {
  constexpr int64_t f = SamplesWire::kMetaFields;
  CHECK_EQ(static_cast<int64_t>(wire.meta.size()) % f, 0) << "sample records";
  CHECK_EQ(wire.tokens.size(), wire.logprobs.size()) << "a log-probability per token";
  std::vector<infer::RolloutSample> samples(wire.meta.size() / f);
  size_t at = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const int64_t* m = wire.meta.data() + i * f;
    infer::RolloutSample& s = samples[i];
    s.request = m[0] + request_offset;
    s.sample = static_cast<int>(m[1]);
    const auto n = static_cast<size_t>(m[2]);
    CHECK_LE(at + n, wire.tokens.size()) << "a sample past the message";
    s.tokens.assign(wire.tokens.begin() + at, wire.tokens.begin() + at + n);
    s.logprobs.assign(wire.logprobs.begin() + at, wire.logprobs.begin() + at + n);
    s.stop_reason = kStopReasons.at(static_cast<size_t>(m[3]));
    at += n;
  }
  CHECK_EQ(at, wire.tokens.size()) << "tokens past the samples";
  return samples;
}

}  // namespace anvil::rl
