// ExpF64 against glibc's exp (the bits it restates) and against expl (its
// accuracy); ExpRunningSums on every tier the CPU has against the scalar
// restatement, bit for bit, on rows of every length and special values.
#include "anvil/kernels/exp_sums.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "anvil/kernels/ref/exp_sums_ref.h"

namespace anvil::kernels {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

uint64_t Bits(double x) { return std::bit_cast<uint64_t>(x); }

// Inputs that reach every branch: the fast path over each table index, the
// edges of 2^-54, 512 and 1024, the over- and underflow thresholds, the
// subnormal results and the special values.
std::vector<double> Inputs() {
  std::vector<double> xs = {
      0.0,     -0.0,     kInf,    -kInf,  kNaN,   -kNaN,   1e-300, -1e-300, 0x1p-54, -0x1p-54,
      0x1p-55, -0x1p-55, 512.0,   -512.0, 1024.0, -1024.0, 709.78, 709.79,  -708.39, -708.40,
      -745.13, -745.14,  -744.44, -740.0, -1e308, 1e308,   5e-324, -5e-324, 1.0,     -1.0};
  for (double edge :
       {0x1p-54, 512.0, 1024.0, 709.782712893384, -745.1332191019411, -708.3964185322641}) {
    double below = edge, above = edge;
    for (int i = 0; i < 64; ++i) {
      below = std::nextafter(below, -kInf);
      above = std::nextafter(above, kInf);
      xs.push_back(below);
      xs.push_back(above);
      xs.push_back(-below);
      xs.push_back(-above);
    }
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> wide(-760.0, 720.0), near(-2.0, 2.0), logit(-60.0, 0.0);
  for (int i = 0; i < 400000; ++i) {
    xs.push_back(wide(rng));
    xs.push_back(near(rng));
    xs.push_back(logit(rng));
    // Any bit pattern: NaN payloads, subnormals, huge values.
    xs.push_back(std::bit_cast<double>(rng()));
  }
  for (int k = 0; k < 128 * 16; ++k) xs.push_back(k * 0x1.62e42fefa39efp-8 + 1e-9 * (k % 7));
  return xs;
}

// The glibc of Debian 12 (2.36) on an FMA machine is the reference; other
// libms (or glibc's non-FMA build) may differ in the last bit now and then.
TEST(ExpF64, BitsOfGlibcExp) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 28))
  // glibc runs its FMA build of exp where the CPU has FMA and AVX2.
  const CpuFeatures& cpu = GetCpuFeatures();
  if (!cpu.fma || !cpu.avx2) GTEST_SKIP() << "glibc's non-FMA exp rounds differently";
  int64_t mismatches = 0;
  for (double x : Inputs()) {
    const double want = std::exp(x);
    const double got = ExpF64(x);
    const bool same = Bits(got) == Bits(want) || (std::isnan(got) && std::isnan(want));
    if (!same && ++mismatches <= 5) {
      ADD_FAILURE() << std::hexfloat << "exp(" << x << "): glibc " << want << ", ExpF64 " << got;
    }
  }
  EXPECT_EQ(mismatches, 0);
#else
  GTEST_SKIP() << "not glibc 2.28 or later";
#endif
}

// Independent of any libm: within 0.52 ulp of expl where the result is
// normal (glibc's bound), and the special values.
TEST(ExpF64, Accuracy) {
  EXPECT_EQ(Bits(ExpF64(0.0)), Bits(1.0));
  EXPECT_EQ(Bits(ExpF64(-kInf)), Bits(0.0));
  EXPECT_EQ(ExpF64(kInf), kInf);
  EXPECT_TRUE(std::isnan(ExpF64(kNaN)));
  EXPECT_EQ(ExpF64(709.79), kInf);
  EXPECT_EQ(Bits(ExpF64(-745.14)), Bits(0.0));
  EXPECT_GT(ExpF64(-745.0), 0.0);
  EXPECT_LT(ExpF64(-745.0), std::numeric_limits<double>::min());  // subnormal
  double worst = 0;
  for (double x : Inputs()) {
    if (!(x > -708.39 && x < 709.78)) continue;
    const long double want = ::expl(static_cast<long double>(x));
    const double got = ExpF64(x);
    const long double ulp =
        std::nextafter(static_cast<double>(want), kInf) - static_cast<double>(want);
    worst = std::max(worst, static_cast<double>(std::fabs(got - want) / ulp));
  }
  EXPECT_LT(worst, 0.52);
}

std::vector<Isa> Tiers() {
  std::vector<Isa> tiers = {Isa::kScalar};
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(isa)) tiers.push_back(isa);
  }
  return tiers;
}

void ExpectTiersMatchRef(const std::vector<float>& x, double scale, double shift) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> want_w(n), want_s(n);
  ref::ExpRunningSums(n, x.data(), scale, shift, want_w.data(), want_s.data());
  for (Isa isa : Tiers()) {
    // Poisoned outputs with a guard past the end: every element written, none beyond.
    std::vector<double> w(n + 1, -1.0), s(n + 1, -1.0);
    ExpRunningSums(isa, n, x.data(), scale, shift, w.data(), s.data());
    for (int64_t i = 0; i < n; ++i) {
      const bool same_w =
          Bits(w[i]) == Bits(want_w[i]) || (std::isnan(w[i]) && std::isnan(want_w[i]));
      const bool same_s =
          Bits(s[i]) == Bits(want_s[i]) || (std::isnan(s[i]) && std::isnan(want_s[i]));
      ASSERT_TRUE(same_w && same_s)
          << IsaName(isa) << " n=" << n << " i=" << i << std::hexfloat << " x=" << x[i]
          << ": weight " << w[i] << " vs " << want_w[i] << ", sum " << s[i] << " vs " << want_s[i];
    }
    EXPECT_EQ(w[n], -1.0) << IsaName(isa) << " wrote past n=" << n;
    EXPECT_EQ(s[n], -1.0) << IsaName(isa) << " wrote past n=" << n;
  }
}

TEST(ExpRunningSums, TiersEqualScalarOnEveryLength) {
  std::mt19937 rng(3);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  for (int64_t n = 0; n <= 41; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = logit(rng);
    const double top = n > 0 ? *std::max_element(x.begin(), x.end()) : 0;
    ExpectTiersMatchRef(x, 1.0, top);              // greedy's plain softmax
    ExpectTiersMatchRef(x, 1.0 / 0.7, top / 0.7);  // a temperature
  }
  // Rows around and past the SIMD tiers' lag between exponentials and sums.
  for (int64_t n : {255, 256, 257, 263, 520, 8192}) {
    std::vector<float> x(n);
    for (float& v : x) v = logit(rng);
    ExpectTiersMatchRef(x, 1.0 / 0.3, 40.0);
  }
}

TEST(ExpRunningSums, TiersEqualScalarOnSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // -inf (a masked logit), values scaled past 512 and 1024 (subnormal and
  // zero weights), tiny differences (weights of 1 + x), NaN.
  std::vector<float> x = {0.0f,     -inf,  -300.0f, -600.0f, -800.0f, 1e-20f,  -1e-20f,
                          2.0f,     -0.0f, 3.0f,    -1e30f,  5.0f,    -745.0f, 0.5f,
                          -2000.0f, 1.0f,  nan,     -1.0f,   1e-10f,  -4.0f};
  ExpectTiersMatchRef(x, 1.0, 0.0);
  ExpectTiersMatchRef(x, 2.5, 1.0);
  ExpectTiersMatchRef(x, 1e-20, 0.0);
}

TEST(ExpRunningSums, SumsInOrder) {
  const std::vector<float> x = {0.0f, -1.0f, -2.0f, 1.0f, -0.5f};
  for (Isa isa : Tiers()) {
    std::vector<double> w(x.size()), s(x.size());
    ExpRunningSums(isa, static_cast<int64_t>(x.size()), x.data(), 2.0, 1.0, w.data(), s.data());
    double sum = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      EXPECT_EQ(w[i], ExpF64(std::fma(static_cast<double>(x[i]), 2.0, -1.0))) << IsaName(isa);
      sum += w[i];
      EXPECT_EQ(s[i], sum) << IsaName(isa);
    }
  }
}

// FirstMaxIndex on every tier against the scan it stands for.
void ExpectFirstMaxOnEveryTier(const std::vector<float>& x, const char* what) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t want = ref::FirstMaxIndex(n, x.data());
  for (const Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaSupported(isa)) continue;
    EXPECT_EQ(FirstMaxIndex(isa, n, x.data()), want) << what << " n " << n << " " << IsaName(isa);
  }
}

TEST(FirstMaxIndex, TiersEqualTheScanOnEveryLength) {
  std::mt19937 rng(5);
  std::normal_distribution<float> logit(0.0f, 4.0f);
  for (int64_t n = 1; n <= 41; ++n) {
    std::vector<float> x(n);
    for (float& v : x) v = logit(rng);
    ExpectFirstMaxOnEveryTier(x, "random");
    for (int64_t at = 0; at < n; ++at) {  // the largest at every place (tails too)
      std::vector<float> y = x;
      y[at] = 100.0f;
      ExpectFirstMaxOnEveryTier(y, "largest placed");
    }
  }
  for (int64_t n : {255, 8192, 32000}) {
    std::vector<float> x(n);
    for (float& v : x) v = logit(rng);
    ExpectFirstMaxOnEveryTier(x, "random");
    x[n - 1] = 1000.0f;
    ExpectFirstMaxOnEveryTier(x, "largest last");
  }
}

TEST(FirstMaxIndex, TiesSignedZerosNaNAndInfinities) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {1, 5, 16, 17, 40}) {
    std::vector<float> x(n, -3.0f);
    ExpectFirstMaxOnEveryTier(x, "all equal");
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = a + 1; b < n; b += 3) {
        std::vector<float> y(n, -3.0f);
        y[a] = -0.0f;
        y[b] = 0.0f;  // +0 after -0: the first stays
        ExpectFirstMaxOnEveryTier(y, "-0 then +0");
        std::swap(y[a], y[b]);
        ExpectFirstMaxOnEveryTier(y, "+0 then -0");
        y[a] = y[b] = 7.0f;
        ExpectFirstMaxOnEveryTier(y, "two equal largest");
        y[b] = nan;
        ExpectFirstMaxOnEveryTier(y, "a NaN after the largest");
        y[a] = nan;
        y[b] = 7.0f;
        ExpectFirstMaxOnEveryTier(y, "a NaN before the largest");
      }
    }
    std::vector<float> z(n, -inf);
    ExpectFirstMaxOnEveryTier(z, "all -inf");
    z[0] = nan;
    if (n > 1) z[n - 1] = inf;
    ExpectFirstMaxOnEveryTier(z, "NaN first");
    z[0] = 1.0f;
    ExpectFirstMaxOnEveryTier(z, "+inf last");
    std::vector<float> all_nan(n, nan);
    ExpectFirstMaxOnEveryTier(all_nan, "all NaN");
  }
  // Whole vectors, no tail: the largest and one NaN at every pair of places
  // (a NaN let into the running max would survive to the lane reduction).
  for (int64_t n : {8, 16, 32}) {
    for (int64_t a = 0; a < n; ++a) {
      for (int64_t b = 0; b < n; ++b) {
        if (a == b) continue;
        std::vector<float> y(n, -3.0f);
        y[a] = 7.0f;
        y[b] = nan;
        ExpectFirstMaxOnEveryTier(y, "the largest and a NaN");
      }
    }
  }
}

}  // namespace
}  // namespace anvil::kernels
