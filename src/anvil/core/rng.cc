// Philox4x32-10 and the addressed stream built on it.
#include "anvil/core/rng.h"

#include <cmath>
#include <numbers>

#include "anvil/core/check.h"

namespace anvil {
namespace {

// Multipliers and Weyl key increments from the Philox paper.
constexpr uint32_t kPhiloxM0 = 0xD2511F53;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85;  // sqrt(3) - 1

inline void MulHiLo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = uint64_t{a} * b;
  *hi = static_cast<uint32_t>(p >> 32);
  *lo = static_cast<uint32_t>(p);
}

constexpr double kTwoPow24Inv = 1.0 / 16777216.0;

}  // namespace

PhiloxCounter Philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    MulHiLo(kPhiloxM0, c[0], &hi0, &lo0);
    MulHiLo(kPhiloxM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k = {k[0] + kPhiloxW0, k[1] + kPhiloxW1};
  }
  return c;
}

RngStream::RngStream(uint64_t seed, RngPurpose purpose, uint32_t step, uint32_t rank)
    : key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}, step_(step) {
  CHECK_LT(rank, 1u << 24) << "rank does not fit the 24-bit field of the RNG counter";
  purpose_rank_ = (uint32_t{static_cast<uint8_t>(purpose)} << 24) | rank;
}

PhiloxCounter RngStream::Block(uint64_t block_index) const {
  return Philox4x32_10({static_cast<uint32_t>(block_index),
                        static_cast<uint32_t>(block_index >> 32), step_, purpose_rank_},
                       key_);
}

uint32_t RngStream::U32(uint64_t i) const { return Block(i / 4)[i % 4]; }

float RngStream::Uniform(uint64_t i) const {
  return static_cast<float>((U32(i) >> 8) * kTwoPow24Inv);
}

float RngStream::Normal(uint64_t i) const {
  // Shift by half a step so u1 is in (0, 1) and log(u1) is finite.
  const double u1 = ((U32(2 * i) >> 8) + 0.5) * kTwoPow24Inv;
  const double u2 = (U32(2 * i + 1) >> 8) * kTwoPow24Inv;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                            std::cos(2.0 * std::numbers::pi * u2));
}

void RngStream::FillUniform(std::span<float> out, uint64_t first) const {
  for (size_t j = 0; j < out.size(); ++j) out[j] = Uniform(first + j);
}

void RngStream::FillNormal(std::span<float> out, float mean, float stddev, uint64_t first) const {
  for (size_t j = 0; j < out.size(); ++j) out[j] = mean + stddev * Normal(first + j);
}

}  // namespace anvil
