// SwiGLU (act.h): every tier vs the double oracle with derived error bounds,
// the oracle's backward vs finite differences, saturated inputs (|g| ~ 100),
// bitwise determinism and batch invariance, and in-place backward.
#include "anvil/kernels/act.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/kernels/ref/act_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

using testing::AsDouble;
using testing::Ctx;
using testing::kU;
using testing::Random;
using testing::SameBits;
using testing::StorageU;
using testing::SupportedIsas;

// Widths around the vector sizes and the 2048-column work block.
const int64_t kWidths[] = {1, 3, 8, 15, 16, 17, 100, 2047, 2049};

template <typename T>
class SwiGluTest : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, BF16>;
TYPED_TEST_SUITE(SwiGluTest, ElementTypes);

template <typename T>
double OutU() {
  return StorageU<T>() == kU ? 0.0 : StorageU<T>();
}

// Bounds (first order). Exp is within 1 ulp <= 2u; 1 + e and the division add
// u each, so sig is within (2u e/(1+e) + 2u) <= 4u; silu = g sig 5u; out 6u.
// Backward: dup = dout silu 6u. 1 - sig = e sig within 7u, g (1 - sig) 7u, the
// fma rounds u: |inner - exact| <= 7u |g (1 - sig)| + u |inner|; then three
// products and sig's 4u: dgate within |dout up sig| (7u |g (1-sig)| + u |inner|)
// + 7u |dgate|. Tolerances are twice these, plus 2^-8 |y| for a bf16 output.
TYPED_TEST(SwiGluTest, MatchesReference) {
  using T = TypeParam;
  for (Isa isa : SupportedIsas()) {
    for (int64_t f : kWidths) {
      for (int64_t tokens : {1, 3}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " tokens " << tokens << " f " << f);
        const auto gu = Random<T>(tokens * 2 * f, 1, -20, 20);
        const auto dout = Random<T>(tokens * f, 2);
        std::vector<T> out(tokens * f), dgu(tokens * 2 * f);
        SwiGluForward(Ctx(isa, 2), tokens, f, gu.data(), out.data());
        SwiGluBackward(Ctx(isa, 2), tokens, f, gu.data(), dout.data(), dgu.data());
        std::vector<double> out_ref(tokens * f), dgu_ref(tokens * 2 * f);
        ref::SwiGluForward(tokens, f, gu.data(), out_ref.data());
        ref::SwiGluBackward(tokens, f, gu.data(), dout.data(), dgu_ref.data());
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t j = 0; j < f; ++j) {
            const double g = AsDouble(gu[t * 2 * f + j]), u = AsDouble(gu[t * 2 * f + f + j]);
            const double d = AsDouble(dout[t * f + j]);
            const double sig = ref::Sigmoid(g), inner = 1 + g * (1 - sig);
            const double y = out_ref[t * f + j];
            ASSERT_LE(std::abs(AsDouble(out[t * f + j]) - y), (12 * kU + OutU<T>()) * std::abs(y))
                << "out t " << t << " j " << j;
            const double dg = dgu_ref[t * 2 * f + j], du = dgu_ref[t * 2 * f + f + j];
            const double dg_bound =
                std::abs(d * u * sig) * (7 * kU * std::abs(g * (1 - sig)) + kU * std::abs(inner)) +
                7 * kU * std::abs(dg);
            ASSERT_LE(std::abs(AsDouble(dgu[t * 2 * f + j]) - dg),
                      2 * dg_bound + OutU<T>() * std::abs(dg))
                << "dgate t " << t << " j " << j;
            ASSERT_LE(std::abs(AsDouble(dgu[t * 2 * f + f + j]) - du),
                      (12 * kU + OutU<T>()) * std::abs(du))
                << "dup t " << t << " j " << j;
          }
        }
      }
    }
  }
}

// Saturated gates: exp(-g) overflows (g < -88.7) or underflows; results stay
// finite, and the gradients at the far ends are the exact limits.
TEST(SwiGlu, SaturatedGates) {
  const float gates[] = {-100.0f, -88.8f, -50.0f, 0.0f, 50.0f, 100.0f};
  const int64_t f = std::size(gates);
  std::vector<float> gu(2 * f), dout(f, 1.0f), out(f), dgu(2 * f);
  for (int64_t j = 0; j < f; ++j) {
    gu[j] = gates[j];
    gu[f + j] = 2.0f;
  }
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    SwiGluForward(Ctx(isa, 1), 1, f, gu.data(), out.data());
    SwiGluBackward(Ctx(isa, 1), 1, f, gu.data(), dout.data(), dgu.data());
    for (int64_t j = 0; j < f; ++j) {
      const double g = gates[j], sig = ref::Sigmoid(g);
      EXPECT_TRUE(std::isfinite(out[j]) && std::isfinite(dgu[j]) && std::isfinite(dgu[f + j])) << g;
      EXPECT_NEAR(out[j], g * sig * 2, 1e-5 * std::abs(g * sig * 2) + 1e-30) << g;
      EXPECT_NEAR(dgu[j], 2 * sig * (1 + g * (1 - sig)), 1e-5 + 1e-30) << g;
      EXPECT_NEAR(dgu[f + j], g * sig, 1e-5 * std::abs(g * sig) + 1e-30) << g;
    }
    EXPECT_EQ(dgu[f - 1], 2.0f);  // g = 100: sig = 1, inner = 1
  }
}

// Central differences of the oracle (double), h = 1e-6 relative: truncation
// ~1e-12, cancellation ~1e-10; tolerance 1e-6 of the largest gradient.
TEST(SwiGluReference, BackwardMatchesFiniteDifferences) {
  const int64_t tokens = 2, f = 5;
  const auto gf = testing::RandomF32(tokens * 2 * f, 3, -4, 4);
  const auto rf = testing::RandomF32(tokens * f, 4);
  std::vector<double> gu(gf.begin(), gf.end()), proj(rf.begin(), rf.end());
  const auto loss = [&](const std::vector<double>& v) {
    std::vector<double> y(tokens * f);
    ref::SwiGluForward(tokens, f, v.data(), y.data());
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * proj[i];
    return l;
  };
  std::vector<double> grad(tokens * 2 * f);
  ref::SwiGluBackward(tokens, f, gu.data(), proj.data(), grad.data());
  double scale = 0;
  for (double g : grad) scale = std::max(scale, std::abs(g));
  for (size_t i = 0; i < gu.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::abs(gu[i]));
    const double keep = gu[i];
    gu[i] = keep + h;
    const double up = loss(gu);
    gu[i] = keep - h;
    const double down = loss(gu);
    gu[i] = keep;
    EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6 * scale) << "i " << i;
  }
}

// Same bits on 1 and 2 threads, twice, and for a token alone vs in a batch
// large enough (gate and up past the L2s, even in bf16) that its loops ask
// for columns ahead.
TYPED_TEST(SwiGluTest, DeterministicAndBatchInvariant) {
  using T = TypeParam;
  const int64_t f = 3000;  // two column blocks per token
  const int64_t tokens = rowwise_internal::kL2Bytes / (2 * f * int64_t{sizeof(BF16)}) + 16;
  const auto gu = Random<T>(tokens * 2 * f, 5, -8, 8);
  const auto dout = Random<T>(tokens * f, 6);
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<T> first_out, first_dgu;
    for (int threads : {1, 2, 2}) {
      std::vector<T> out(tokens * f), dgu(tokens * 2 * f);
      SwiGluForward(Ctx(isa, threads), tokens, f, gu.data(), out.data());
      SwiGluBackward(Ctx(isa, threads), tokens, f, gu.data(), dout.data(), dgu.data());
      if (first_out.empty()) {
        first_out = out, first_dgu = dgu;
        continue;
      }
      EXPECT_TRUE(SameBits(out, first_out)) << threads << " threads";
      EXPECT_TRUE(SameBits(dgu, first_dgu)) << threads << " threads";
    }
    const int64_t t = 4;
    std::vector<T> out1(f), dgu1(2 * f);
    SwiGluForward(Ctx(isa, 2), 1, f, gu.data() + t * 2 * f, out1.data());
    SwiGluBackward(Ctx(isa, 2), 1, f, gu.data() + t * 2 * f, dout.data() + t * f, dgu1.data());
    EXPECT_TRUE(
        SameBits(out1, std::vector<T>(first_out.begin() + t * f, first_out.begin() + (t + 1) * f)));
    EXPECT_TRUE(SameBits(
        dgu1, std::vector<T>(first_dgu.begin() + t * 2 * f, first_dgu.begin() + (t + 1) * 2 * f)));
  }
}

TYPED_TEST(SwiGluTest, BackwardInPlace) {
  using T = TypeParam;
  const int64_t tokens = 3, f = 37;
  const auto gu = Random<T>(tokens * 2 * f, 7, -8, 8);
  const auto dout = Random<T>(tokens * f, 8);
  for (Isa isa : SupportedIsas()) {
    std::vector<T> dgu(tokens * 2 * f), inout = gu;
    SwiGluBackward(Ctx(isa, 2), tokens, f, gu.data(), dout.data(), dgu.data());
    SwiGluBackward(Ctx(isa, 2), tokens, f, inout.data(), dout.data(), inout.data());
    EXPECT_TRUE(SameBits(dgu, inout)) << IsaName(isa);
  }
}

TEST(SwiGluDeathTest, ChecksArguments) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> gu(8), out(4);
  EXPECT_DEATH(SwiGluForward(Ctx(Isa::kScalar, 1), 1, 0, gu.data(), out.data()), "f \\(the hidden");
  EXPECT_DEATH(SwiGluBackward(Ctx(Isa::kScalar, 1), 1, 4, gu.data(), nullptr, gu.data()), "dout");
}

}  // namespace
}  // namespace anvil::kernels
