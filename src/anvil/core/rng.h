// Counter-based random numbers: Philox4x32-10 (Salmon et al., SC'11). A number
// is a pure function of (seed, purpose, step, rank, index), so any sample can
// be regenerated anywhere — on another rank, after a resume, in any order.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace anvil {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// One Philox4x32 block with 10 rounds: 128 random bits from a 128-bit counter.
PhiloxCounter Philox4x32_10(PhiloxCounter counter, PhiloxKey key);

// What a stream of numbers is for; part of the address so that, e.g., weight
// init and dropout at the same step never share numbers.
enum class RngPurpose : uint8_t {
  kInit = 1,
  kDropout = 2,
  kDataOrder = 3,
  kSampling = 4,
  kTasks = 5,  // RL tasks generated from a seed (rl/tasks.h)
  kTest = 255,
};

// An addressed stream. Counter layout (32-bit words):
//   c0,c1 = block index (64 bits), c2 = step, c3 = purpose << 24 | rank (24 bits);
//   key = the 64-bit seed.
// Each block yields 4 uint32; value i lives in block i / 4, lane i % 4.
class RngStream {
 public:
  RngStream(uint64_t seed, RngPurpose purpose, uint32_t step = 0, uint32_t rank = 0);

  PhiloxCounter Block(uint64_t block_index) const;

  // The i-th 32-bit value of the stream.
  uint32_t U32(uint64_t i) const;

  // Uniform in [0, 1) with 24 random bits (exactly representable in f32).
  float Uniform(uint64_t i) const;

  // Standard normal by Box-Muller from values 2i and 2i+1 (math in double).
  float Normal(uint64_t i) const;

  // out[j] = Uniform(first + j) / Normal(first + j)*stddev + mean.
  void FillUniform(std::span<float> out, uint64_t first = 0) const;
  void FillNormal(std::span<float> out, float mean, float stddev, uint64_t first = 0) const;

 private:
  PhiloxKey key_;
  uint32_t step_;
  uint32_t purpose_rank_;
};

}  // namespace anvil
