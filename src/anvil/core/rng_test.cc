// Philox4x32-10 against the Random123 known-answer vectors, and the stream's
// addressing and distribution properties.
#include "anvil/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace anvil {
namespace {

struct Kat {
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// From the kat_vectors file distributed with Random123 (philox4x32, 10 rounds).
const Kat kKats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Philox, KnownAnswers) {
  for (const Kat& kat : kKats) {
    EXPECT_EQ(Philox4x32_10(kat.counter, kat.key), kat.expected);
  }
}

TEST(RngStream, SameAddressSameNumbers) {
  RngStream a(42, RngPurpose::kInit, 7, 3);
  RngStream b(42, RngPurpose::kInit, 7, 3);
  for (uint64_t i = 0; i < 1000; i += 37) EXPECT_EQ(a.U32(i), b.U32(i));
  // Random access equals sequential fill.
  std::vector<float> fill(100);
  a.FillNormal(fill, 0.0f, 1.0f, 500);
  for (int j = 0; j < 100; ++j) EXPECT_EQ(fill[j], a.Normal(500 + j));
}

TEST(RngStream, EveryAddressFieldChangesTheStream) {
  const RngStream base(42, RngPurpose::kInit, 7, 3);
  const RngStream others[] = {
      RngStream(43, RngPurpose::kInit, 7, 3), RngStream(42ull << 32 | 42, RngPurpose::kInit, 7, 3),
      RngStream(42, RngPurpose::kDropout, 7, 3), RngStream(42, RngPurpose::kInit, 8, 3),
      RngStream(42, RngPurpose::kInit, 7, 4)};
  for (const RngStream& other : others) {
    int same = 0;
    for (uint64_t i = 0; i < 64; ++i) same += base.U32(i) == other.U32(i);
    EXPECT_LT(same, 2);
  }
  // Distinct 64-bit block indices (high word too) give distinct blocks.
  EXPECT_NE(base.Block(1), base.Block(1ull << 32 | 1));
}

TEST(RngStream, UniformAndNormalMoments) {
  RngStream s(1234, RngPurpose::kTest);
  constexpr int kN = 200000;
  double sum_u = 0, sum_n = 0, sum_n2 = 0;
  float min_u = 1, max_u = 0;
  for (int i = 0; i < kN; ++i) {
    const float u = s.Uniform(i);
    min_u = std::min(min_u, u);
    max_u = std::max(max_u, u);
    sum_u += u;
    const double n = s.Normal(i);
    ASSERT_TRUE(std::isfinite(n));
    sum_n += n;
    sum_n2 += n * n;
  }
  EXPECT_GE(min_u, 0.0f);
  EXPECT_LT(max_u, 1.0f);
  // Standard errors: uniform mean 1/sqrt(12 N) ~ 6.5e-4, normal mean 1/sqrt(N) ~ 2.2e-3,
  // normal variance sqrt(2/N) ~ 3.2e-3; allow five of each.
  EXPECT_NEAR(sum_u / kN, 0.5, 5 * 6.5e-4);
  EXPECT_NEAR(sum_n / kN, 0.0, 5 * 2.2e-3);
  EXPECT_NEAR(sum_n2 / kN, 1.0, 5 * 3.2e-3);
}

TEST(RngStream, NoRepeatsInManyValues) {
  RngStream s(99, RngPurpose::kTest);
  std::set<uint32_t> seen;
  for (uint64_t i = 0; i < 100000; ++i) seen.insert(s.U32(i));
  // Birthday bound: ~1.2 expected collisions among 1e5 draws of 32 bits.
  EXPECT_GT(seen.size(), 100000u - 10);
}

}  // namespace
}  // namespace anvil
