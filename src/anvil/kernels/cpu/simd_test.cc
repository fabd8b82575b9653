// simd.h on every tier this CPU runs: Exp's accuracy against double exp and
// its bits equal across widths, the documented reduction tree, bf16 narrowing
// equal to convert.h bit for bit, partial loads/stores touching only their lanes.
#include "anvil/kernels/cpu/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "anvil/core/convert.h"
#include "anvil/core/cpu_features.h"
#include "anvil/kernels/cpu/simd_test_probe.h"

namespace anvil::kernels::simd_testing {

const Probe& ScalarProbe() {
  static constexpr Probe kProbe = ANVIL_SIMD_NS::probe::MakeProbe<ANVIL_SIMD_NS::F32x1>();
  return kProbe;
}

namespace {

std::vector<const Probe*> Tiers() {
  std::vector<const Probe*> tiers = {&ScalarProbe()};
  if (IsaSupported(Isa::kAvx2)) tiers.push_back(&Avx2Probe());
  if (IsaSupported(Isa::kAvx512)) tiers.push_back(&Avx512Probe());
  return tiers;
}

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

// Error of `got` in units of the last place of the f32 nearest to `exact`.
// Past FLT_MAX (after rounding) the only right answer is +inf.
double UlpError(float got, double exact) {
  if (std::isinf(static_cast<float>(exact))) {
    return got == static_cast<float>(exact) ? 0.0 : std::numeric_limits<double>::infinity();
  }
  if (exact == 0.0) return got == 0.0f ? 0.0 : std::numeric_limits<double>::infinity();
  int e = 0;
  std::frexp(exact, &e);  // exact = f * 2^e, f in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::abs(static_cast<double>(got) - exact) / ulp;
}

// Every `step`-th f32 in [-104, 89] (both signs), plus a dense run around 0.
std::vector<float> ExpInputs(uint32_t step) {
  std::vector<float> x;
  for (uint32_t u = 0; u <= Bits(104.0f); u += step) {
    const float f = std::bit_cast<float>(u);
    x.push_back(-f);
    if (f <= 89.0f) x.push_back(f);
  }
  for (int i = -5000; i <= 5000; ++i) x.push_back(static_cast<float>(i) * 1e-5f);
  return x;
}

#ifdef ANVIL_SANITIZED
constexpr uint32_t kExpStep = 20011;  // ~110k inputs: instrumented code is slow
#else
constexpr uint32_t kExpStep = 1009;  // ~2.2M inputs
#endif

TEST(SimdExp, WithinOneUlpOfDoubleExp) {
  const std::vector<float> x = ExpInputs(kExpStep);
  std::vector<float> y(x.size());
  for (const Probe* tier : Tiers()) {
    tier->exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    float worst_x = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double exact = std::exp(static_cast<double>(x[i]));
      // Below 2^-126 the result is subnormal: an absolute 1-ulp (2^-149) bound.
      const double err = UlpError(y[i], exact);
      if (err > worst) {
        worst = err;
        worst_x = x[i];
      }
    }
    // Measured 0.86 ulp on every tier: the polynomial's truncation is < 0.1
    // ulp, the rest is the rounding of the Horner FMAs (the 2^n scaling is
    // exact for normal results).
    EXPECT_LE(worst, 1.0) << tier->lanes << " lanes, worst at x = " << worst_x;
  }
}

TEST(SimdExp, SameBitsOnEveryWidth) {
  const std::vector<float> x = ExpInputs(kExpStep * 7 + 2);
  std::vector<float> ref(x.size()), y(x.size());
  ScalarProbe().exp(x.data(), ref.data(), static_cast<int64_t>(x.size()));
  for (const Probe* tier : Tiers()) {
    tier->exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(Bits(y[i]), Bits(ref[i])) << tier->lanes << " lanes, x = " << x[i];
    }
  }
}

TEST(SimdExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {0.0f,  -0.0f,   -inf,  inf,    nan,    -104.5f, -1000.0f,
                                89.5f, 1000.0f, 88.7f, 88.73f, -87.0f, -103.0f};
  std::vector<float> y(x.size());
  for (const Probe* tier : Tiers()) {
    tier->exp(x.data(), y.data(), static_cast<int64_t>(x.size()));
    EXPECT_EQ(y[0], 1.0f);
    EXPECT_EQ(y[1], 1.0f);
    EXPECT_EQ(Bits(y[2]), 0u);
    EXPECT_EQ(y[3], inf);
    EXPECT_TRUE(std::isnan(y[4]));
    EXPECT_EQ(Bits(y[5]), 0u);
    EXPECT_EQ(Bits(y[6]), 0u);
    EXPECT_EQ(y[7], inf);
    EXPECT_EQ(y[8], inf);
    EXPECT_LE(UlpError(y[9], std::exp(double{88.7f})), 2.0);  // near FLT_MAX, still finite
    EXPECT_EQ(y[10], inf);                                    // exp(88.73) > FLT_MAX
    EXPECT_LE(UlpError(y[11], std::exp(-87.0)), 2.0);
    EXPECT_LE(UlpError(y[12], std::exp(-103.0)), 1.0);  // subnormal
  }
}

// ReduceSum is the halving tree: x[i] += x[i + w/2] for w = lanes, ..., 2.
TEST(SimdReduce, SumFollowsTheHalvingTree) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  for (const Probe* tier : Tiers()) {
    for (int trial = 0; trial < 1000; ++trial) {
      std::vector<float> x(tier->lanes);
      for (float& v : x) v = std::ldexp(mantissa(rng), exponent(rng));
      std::vector<float> tree = x;
      for (int w = tier->lanes; w > 1; w /= 2) {
        for (int i = 0; i < w / 2; ++i) tree[i] = tree[i] + tree[i + w / 2];
      }
      ASSERT_EQ(Bits(tier->reduce_sum(x.data())), Bits(tree[0])) << tier->lanes << " lanes";
      float max = x[0];
      for (float v : x) max = std::max(max, v);
      ASSERT_EQ(tier->reduce_max(x.data()), max);
    }
  }
}

TEST(SimdBf16, NarrowingMatchesConvertBitForBit) {
  std::mt19937 rng(11);
  std::vector<float> x(1000);
  for (float& v : x) v = std::bit_cast<float>(static_cast<uint32_t>(rng()));
  // Ties, carries, subnormals, NaN with payload and sign, infinities.
  const uint32_t special[] = {0x3F808000u, 0x3F818000u, 0x7F7FFFFFu, 0x00400000u, 0x80008000u,
                              0xFFC00001u, 0x7F800001u, 0x7F800000u, 0xFF800000u, 0x00000000u};
  for (size_t i = 0; i < std::size(special); ++i) x[i] = std::bit_cast<float>(special[i]);
  for (const Probe* tier : Tiers()) {
    for (int n : {0, 1, tier->lanes - 1, tier->lanes, tier->lanes + 3, 3 * tier->lanes + 1, 1000}) {
      if (n < 0) continue;
      std::vector<BF16> narrowed(n + 8, BF16{0xABCD});
      std::vector<float> widened(n + 8, -7.0f);
      tier->bf16_round_trip(x.data(), narrowed.data(), widened.data(), n);
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(narrowed[i].bits, F32ToBF16(x[i])) << tier->lanes << " lanes, i " << i;
        ASSERT_EQ(Bits(widened[i]), Bits(BF16ToF32(narrowed[i].bits)));
      }
      for (int i = n; i < n + 8; ++i) {  // StoreN wrote nothing past n
        ASSERT_EQ(narrowed[i].bits, 0xABCD);
        ASSERT_EQ(widened[i], -7.0f);
      }
    }
  }
}

TEST(SimdLoad, PartialLoadsFillTheOtherLanes) {
  for (const Probe* tier : Tiers()) {
    std::vector<float> x(tier->lanes), out(tier->lanes), out_bf16(tier->lanes);
    std::vector<BF16> xb(tier->lanes);
    for (int i = 0; i < tier->lanes; ++i) {
      x[i] = static_cast<float>(i + 1);
      xb[i] = ToBF16(x[i]);
    }
    const float fill = -std::numeric_limits<float>::infinity();
    for (int n = 0; n <= tier->lanes; ++n) {
      tier->load_fill(x.data(), xb.data(), n, fill, out.data(), out_bf16.data());
      for (int i = 0; i < tier->lanes; ++i) {
        ASSERT_EQ(out[i], i < n ? x[i] : fill) << tier->lanes << " lanes, n " << n;
        ASSERT_EQ(out_bf16[i], i < n ? x[i] : fill);
      }
    }
  }
}

TEST(SimdLanewise, FusedOpsRoundOnceAndMaxMinFollowX86) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Probe* tier : Tiers()) {
    const int w = tier->lanes;
    std::vector<float> a(w), b(w), c(w), fma(w), fnma(w), max(w), min(w);
    for (int i = 0; i < w; ++i) {
      a[i] = 1.0f + std::ldexp(1.0f, -12) * static_cast<float>(i + 1);  // a*b needs > 24 bits
      b[i] = 1.0f - std::ldexp(1.0f, -13) * static_cast<float>(i + 3);
      c[i] = -1.0f;
    }
    a[0] = nan;  // Max/Min return the second operand when either is NaN
    if (w > 1) b[1] = nan;
    tier->lanewise(a.data(), b.data(), c.data(), fma.data(), fnma.data(), max.data(), min.data());
    for (int i = 0; i < w; ++i) {
      // NaN lanes: any NaN (the hardware and libm differ in the NaN's sign).
      const auto same = [](float x, float y) {
        return std::isnan(x) ? std::isnan(y) : Bits(x) == Bits(y);
      };
      EXPECT_TRUE(same(fma[i], std::fma(a[i], b[i], c[i]))) << w << " lanes, lane " << i;
      EXPECT_TRUE(same(fnma[i], std::fma(-a[i], b[i], c[i]))) << w << " lanes, lane " << i;
      EXPECT_EQ(Bits(max[i]), Bits(a[i] > b[i] ? a[i] : b[i]));
      EXPECT_EQ(Bits(min[i]), Bits(a[i] < b[i] ? a[i] : b[i]));
    }
  }
}

// Pairs: each value's result is the element-wise one (same RNE bits), whatever
// lane order the width uses, and nothing past n is written.
TEST(SimdPair, ElementwiseThroughPairsKeepsEveryValueInPlace) {
  std::mt19937 rng(13);
  std::vector<float> x(200);
  for (float& v : x) v = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), 3);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = std::numeric_limits<float>::infinity();
  x[7] = std::bit_cast<float>(0x00400000u);  // subnormal
  std::vector<BF16> xb(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = ToBF16(x[i]);
  for (const Probe* tier : Tiers()) {
    for (int n : {0, 1, 2, tier->lanes, 2 * tier->lanes - 1, 2 * tier->lanes, 2 * tier->lanes + 1,
                  5 * tier->lanes + 3, 200}) {
      std::vector<BF16> yb(n + 8, BF16{0xABCD});
      std::vector<float> yf(n + 8, -7.0f);
      tier->pair_fma(xb.data(), yb.data(), x.data(), yf.data(), n);
      for (int i = 0; i < n; ++i) {
        const float want = std::fma(ToFloat(xb[i]), 3.0f, 1.0f);
        ASSERT_EQ(yb[i].bits, F32ToBF16(want)) << tier->lanes << " lanes, n " << n << ", i " << i;
        const float want_f = std::fma(x[i], 3.0f, 1.0f);
        ASSERT_TRUE(std::isnan(want_f) ? std::isnan(yf[i]) : Bits(yf[i]) == Bits(want_f));
      }
      for (int i = n; i < n + 8; ++i) {
        ASSERT_EQ(yb[i].bits, 0xABCD) << tier->lanes << " lanes, n " << n;
        ASSERT_EQ(yf[i], -7.0f);
      }
    }
  }
}

}  // namespace
}  // namespace anvil::kernels::simd_testing
