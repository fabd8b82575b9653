// Fused softmax cross-entropy (xent.h): every tier vs the double oracle with
// derived error bounds (lse, loss, dlogits; z-loss; ignored rows), the
// oracle's backward vs finite differences, large logits, bitwise determinism,
// batch invariance, in-place backward, and bad targets.
#include "anvil/kernels/xent.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "anvil/kernels/ref/xent_ref.h"
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

constexpr int32_t kIgnore = -100;

template <typename T>
class CrossEntropyTest : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, BF16>;
TYPED_TEST_SUITE(CrossEntropyTest, ElementTypes);

std::vector<int32_t> Targets(int64_t rows, int64_t vocab) {
  std::vector<int32_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = static_cast<int32_t>((r * 7919 + 13) % vocab);
  if (rows > 2) t[1] = kIgnore;  // one padded row
  return t;
}

// Bound on |lse - exact| (first order, in units of u). Each term exp(x - m):
// the f32 difference is within u |x - m| <= u R (R = max - min of the row) and
// Exp within 2u; the chunk rescales add (3 + R) u each (Exp of a rounded
// difference, the fma); adding V positive terms in any order adds <= V u; log
// turns S's relative error into lse's absolute error; rounding lse adds u |lse|.
double LseBound(int64_t vocab, double range, double lse) {
  const double chunks = std::ceil(vocab / 2048.0);
  return kU * ((2 + range) + vocab + chunks * (3 + range) + std::abs(lse) + 4);
}

template <typename T>
void CheckAgainstReference(int64_t rows, int64_t vocab, float z, float lo, float hi) {
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(::testing::Message() << IsaName(isa) << " rows " << rows << " vocab " << vocab
                                      << " z " << z << " range [" << lo << ", " << hi << ")");
    const auto logits = Random<T>(rows * vocab, static_cast<uint32_t>(vocab), lo, hi);
    const auto targets = Targets(rows, vocab);
    const auto dloss = Random<float>(rows, 3, 0.5f, 2.0f);
    const float scale = 0.25f;
    std::vector<float> loss(rows), lse(rows);
    const KernelCtx& ctx = Ctx(isa, 2);
    const CrossEntropyStats stats = CrossEntropyForward(
        ctx, rows, vocab, logits.data(), targets.data(), kIgnore, z, loss.data(), lse.data());
    std::vector<T> dlogits(rows * vocab);
    CrossEntropyBackward(ctx, rows, vocab, logits.data(), targets.data(), kIgnore, z, lse.data(),
                         dloss.data(), scale, dlogits.data());

    std::vector<double> loss_ref(rows), lse_ref(rows), d_ref(rows * vocab);
    std::vector<double> dloss_d(dloss.begin(), dloss.end());
    const int64_t valid = ref::CrossEntropyForward(rows, vocab, logits.data(), targets.data(),
                                                   kIgnore, z, loss_ref.data(), lse_ref.data());
    ref::CrossEntropyBackward(rows, vocab, logits.data(), targets.data(), kIgnore, z,
                              dloss_d.data(), scale, d_ref.data());
    EXPECT_EQ(stats.valid_rows, valid);
    double loss_sum = 0;
    const double out_u = StorageU<T>() == kU ? 0.0 : StorageU<T>();
    for (int64_t r = 0; r < rows; ++r) {
      loss_sum += loss[r];
      if (targets[r] == kIgnore) {
        EXPECT_EQ(loss[r], 0.0f);
        EXPECT_EQ(lse[r], 0.0f);
        for (int64_t v = 0; v < vocab; ++v) ASSERT_EQ(AsDouble(dlogits[r * vocab + v]), 0.0);
        continue;
      }
      double mx = -INFINITY, mn = INFINITY;
      for (int64_t v = 0; v < vocab; ++v) {
        mx = std::max(mx, AsDouble(logits[r * vocab + v]));
        mn = std::min(mn, AsDouble(logits[r * vocab + v]));
      }
      const double lse_tol = LseBound(vocab, mx - mn, lse_ref[r]);
      ASSERT_LE(std::abs(lse[r] - lse_ref[r]), lse_tol) << "lse row " << r;
      // loss: lse's error times d(loss)/d(lse) = 1 + 2 z lse, one f32 rounding.
      ASSERT_LE(std::abs(loss[r] - loss_ref[r]),
                lse_tol * (1 + 2 * z * std::abs(lse_ref[r])) + kU * std::abs(loss_ref[r]) + kU)
          << "loss row " << r;
      // dlogits: p = exp(x - lse) carries lse's error, u |x - lse| from the
      // difference and 2u from Exp; the scale a = g (1 + 2 z lse) adds 3u and
      // the product u (the target's fma: u of the result). Tolerance twice that.
      const double g = dloss[r] * scale;
      for (int64_t v = 0; v < vocab; ++v) {
        const double x = AsDouble(logits[r * vocab + v]);
        const double pa = std::exp(x - lse_ref[r]) * g * (1 + 2 * z * lse_ref[r]);
        const double want = d_ref[r * vocab + v];
        const double bound =
            std::abs(pa) * (lse_tol + kU * (std::abs(x - lse_ref[r]) + 6)) + kU * std::abs(want);
        ASSERT_LE(std::abs(AsDouble(dlogits[r * vocab + v]) - want),
                  2 * bound + out_u * std::abs(want))
            << "dlogits row " << r << " v " << v;
      }
    }
    EXPECT_EQ(stats.loss_sum, loss_sum);  // summed in row order, in double
  }
}

TYPED_TEST(CrossEntropyTest, MatchesReferenceAcrossVocabSizes) {
  for (int64_t vocab : {1, 2, 15, 16, 17, 63, 100, 2047, 2048, 2049, 6151}) {
    CheckAgainstReference<TypeParam>(4, vocab, 0.0f, -8.0f, 8.0f);
  }
}

TYPED_TEST(CrossEntropyTest, MatchesReferenceWithZLoss) {
  CheckAgainstReference<TypeParam>(3, 4099, 1e-2f, -8.0f, 8.0f);
}

// A 128k vocabulary (Llama 3) and logits far from 0: the max shift keeps
// exp in range, where a naive sum would overflow at x ~ 89.
TYPED_TEST(CrossEntropyTest, LargeVocabAndLargeLogits) {
  CheckAgainstReference<TypeParam>(1, 128256, 0.0f, -4.0f, 4.0f);
  CheckAgainstReference<TypeParam>(3, 1000, 1e-4f, 990.0f, 1010.0f);
  CheckAgainstReference<TypeParam>(3, 1000, 0.0f, -1010.0f, -990.0f);
}

// Central differences of the oracle's sum_r loss[r] * dloss[r] (double):
// h = 1e-6 relative, truncation ~1e-12, cancellation ~1e-10.
TEST(CrossEntropyReference, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, vocab = 7;
  const auto lf = testing::RandomF32(rows * vocab, 4, -3, 3);
  std::vector<double> logits(lf.begin(), lf.end());
  const std::vector<int32_t> targets = {2, kIgnore, 6};
  const std::vector<double> dloss = {0.7, 1.3, -0.4};
  const double z = 0.05, scale = 0.5;
  const auto objective = [&](const std::vector<double>& x) {
    std::vector<double> loss(rows), lse(rows);
    ref::CrossEntropyForward(rows, vocab, x.data(), targets.data(), kIgnore, z, loss.data(),
                             lse.data());
    double l = 0;
    for (int64_t r = 0; r < rows; ++r) l += loss[r] * dloss[r] * scale;
    return l;
  };
  std::vector<double> grad(rows * vocab);
  ref::CrossEntropyBackward(rows, vocab, logits.data(), targets.data(), kIgnore, z, dloss.data(),
                            scale, grad.data());
  double biggest = 0;
  for (double g : grad) biggest = std::max(biggest, std::abs(g));
  for (size_t i = 0; i < logits.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::abs(logits[i]));
    const double keep = logits[i];
    logits[i] = keep + h;
    const double up = objective(logits);
    logits[i] = keep - h;
    const double down = objective(logits);
    logits[i] = keep;
    EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6 * biggest) << "i " << i;
  }
}

// Same bits twice and on 1 vs 2 threads; a row alone gives the batch's bits.
TYPED_TEST(CrossEntropyTest, DeterministicAndBatchInvariant) {
  using T = TypeParam;
  const int64_t rows = 6, vocab = 5003;
  const auto logits = Random<T>(rows * vocab, 5, -6, 6);
  const auto targets = Targets(rows, vocab);
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<float> first_loss, first_lse;
    std::vector<T> first_d;
    for (int threads : {1, 2, 2}) {
      std::vector<float> loss(rows), lse(rows);
      std::vector<T> d(rows * vocab);
      const KernelCtx& ctx = Ctx(isa, threads);
      CrossEntropyForward(ctx, rows, vocab, logits.data(), targets.data(), kIgnore, 1e-4f,
                          loss.data(), lse.data());
      CrossEntropyBackward(ctx, rows, vocab, logits.data(), targets.data(), kIgnore, 1e-4f,
                           lse.data(), nullptr, 1.0f / rows, d.data());
      if (first_loss.empty()) {
        first_loss = loss, first_lse = lse, first_d = d;
        continue;
      }
      EXPECT_TRUE(SameBits(loss, first_loss) && SameBits(lse, first_lse) && SameBits(d, first_d))
          << threads << " threads";
    }
    const int64_t r = 4;
    float loss1 = 0, lse1 = 0;
    std::vector<T> d1(vocab);
    CrossEntropyForward(Ctx(isa, 2), 1, vocab, logits.data() + r * vocab, targets.data() + r,
                        kIgnore, 1e-4f, &loss1, &lse1);
    CrossEntropyBackward(Ctx(isa, 2), 1, vocab, logits.data() + r * vocab, targets.data() + r,
                         kIgnore, 1e-4f, &lse1, nullptr, 1.0f / rows, d1.data());
    EXPECT_EQ(std::bit_cast<uint32_t>(loss1), std::bit_cast<uint32_t>(first_loss[r]));
    EXPECT_EQ(std::bit_cast<uint32_t>(lse1), std::bit_cast<uint32_t>(first_lse[r]));
    EXPECT_TRUE(SameBits(
        d1, std::vector<T>(first_d.begin() + r * vocab, first_d.begin() + (r + 1) * vocab)));
  }
}

TYPED_TEST(CrossEntropyTest, BackwardInPlaceOverLogits) {
  using T = TypeParam;
  const int64_t rows = 3, vocab = 333;
  const auto logits = Random<T>(rows * vocab, 6, -6, 6);
  const auto targets = Targets(rows, vocab);
  for (Isa isa : SupportedIsas()) {
    std::vector<float> loss(rows), lse(rows);
    CrossEntropyForward(Ctx(isa, 2), rows, vocab, logits.data(), targets.data(), kIgnore, 0.0f,
                        loss.data(), lse.data());
    std::vector<T> d(rows * vocab), inout = logits;
    CrossEntropyBackward(Ctx(isa, 2), rows, vocab, logits.data(), targets.data(), kIgnore, 0.0f,
                         lse.data(), nullptr, 1.0f, d.data());
    CrossEntropyBackward(Ctx(isa, 2), rows, vocab, inout.data(), targets.data(), kIgnore, 0.0f,
                         lse.data(), nullptr, 1.0f, inout.data());
    EXPECT_TRUE(SameBits(d, inout)) << IsaName(isa);
  }
}

TEST(CrossEntropyDeathTest, ChecksTargets) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> logits(2 * 5), loss(2), lse(2);
  const std::vector<int32_t> bad = {1, 5};
  EXPECT_DEATH(CrossEntropyForward(Ctx(Isa::kScalar, 1), 2, 5, logits.data(), bad.data(), kIgnore,
                                   0.0f, loss.data(), lse.data()),
               "row 1 has target 5");
}

}  // namespace
}  // namespace anvil::kernels
