// RoPE (rope.h): every tier vs the double oracle (angles without a table),
// the oracle's backward vs finite differences, decode-vs-training and packed-
// document position parity (bitwise), determinism, strides, and bad positions.
#include "anvil/kernels/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "anvil/kernels/ref/rope_ref.h"
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

constexpr double kTheta = 10000.0;
constexpr int64_t kMaxPositions = 64;

// A built table for head_dim, owned by the test.
struct Table {
  Table(int64_t head_dim, double theta = kTheta)
      : storage(RopeTableFloats(kMaxPositions, head_dim)),
        view(RopeBuildTable(Ctx(Isa::kScalar, 2), kMaxPositions, head_dim, theta, storage.data())) {
  }
  std::vector<float> storage;
  RopeTable view;
};

template <typename T>
class RopeTest : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, BF16>;
TYPED_TEST_SUITE(RopeTest, ElementTypes);

// Error bound per output, first order: the table's cos and sin are each within
// u of the exact value (rounded once from double; the double angle is exact to
// ~1e-16 relative), the product x1*cos rounds (u) and the fused op rounds
// once (u): |y1 - exact| <= 3u (|x1 cos| + |x2 sin|); same for y2. Tolerance
// 4u (...), plus 2^-8 |y| when x is bf16 (the result is rounded to bf16).
template <typename T>
void CheckAgainstReference(bool backward) {
  const int64_t kHeadDims[] = {2, 6, 16, 32, 34, 64, 80, 128, 130};
  for (Isa isa : SupportedIsas()) {
    for (int64_t hd : kHeadDims) {
      const Table table(hd);
      for (int64_t heads : {1, 3}) {
        for (int64_t tokens : {1, 5}) {
          for (int64_t offset : {0, 7}) {
            for (bool with_positions : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << IsaName(isa) << " hd " << hd << " heads " << heads << " tokens "
                           << tokens << " offset " << offset << " positions " << with_positions);
              const int64_t stride = heads * hd + 5;  // a gap, as in a fused QKV row
              const auto x0 = Random<T>(tokens * stride, 1, -2, 2);
              std::vector<int32_t> pos(tokens);
              for (int64_t t = 0; t < tokens; ++t) pos[t] = static_cast<int32_t>((t * 7 + 3) % 40);
              const int32_t* positions = with_positions ? pos.data() : nullptr;
              std::vector<T> x = x0;
              if (backward) {
                RopeBackward(Ctx(isa, 2), table.view, tokens, heads, stride, positions, offset,
                             x.data());
              } else {
                RopeForward(Ctx(isa, 2), table.view, tokens, heads, stride, positions, offset,
                            x.data());
              }
              std::vector<double> y_ref(tokens * heads * hd);
              ref::Rope(tokens, heads, hd, stride, positions, offset, kTheta, backward ? -1.0 : 1.0,
                        x0.data(), y_ref.data());
              const double out_u = StorageU<T>() == kU ? 0.0 : StorageU<T>();
              const int64_t half = hd / 2;
              for (int64_t t = 0; t < tokens; ++t) {
                const double p = static_cast<double>((with_positions ? pos[t] : t) + offset);
                for (int64_t h = 0; h < heads; ++h) {
                  for (int64_t i = 0; i < hd; ++i) {
                    const int64_t j = i < half ? i : i - half;
                    const double angle = p * std::pow(kTheta, -2.0 * j / hd);
                    const double x1 = AsDouble(x0[t * stride + h * hd + j]);
                    const double x2 = AsDouble(x0[t * stride + h * hd + j + half]);
                    const double scale =
                        std::abs(x1 * std::cos(angle)) + std::abs(x2 * std::sin(angle)) +
                        std::abs(x2 * std::cos(angle)) + std::abs(x1 * std::sin(angle));
                    const double want = y_ref[(t * heads + h) * hd + i];
                    const double got = AsDouble(x[t * stride + h * hd + i]);
                    ASSERT_LE(std::abs(got - want), 4 * kU * scale + out_u * std::abs(want))
                        << "t " << t << " h " << h << " i " << i;
                  }
                }
                for (int64_t g = heads * hd; g < stride; ++g) {  // the gap is untouched
                  ASSERT_EQ(AsDouble(x[t * stride + g]), AsDouble(x0[t * stride + g]));
                }
              }
            }
          }
        }
      }
    }
  }
}

TYPED_TEST(RopeTest, ForwardMatchesReference) { CheckAgainstReference<TypeParam>(false); }
TYPED_TEST(RopeTest, BackwardMatchesReference) { CheckAgainstReference<TypeParam>(true); }

// The oracle's backward is the adjoint of its forward: central differences of
// L = sum(y * R) (linear in x, so the only error is cancellation, ~1e-16 |L| / h
// with h = 1e-6: 1e-9) within 1e-6 of the largest gradient.
TEST(RopeReference, BackwardMatchesFiniteDifferences) {
  const int64_t tokens = 3, heads = 2, hd = 6, stride = heads * hd;
  const auto xf = testing::RandomF32(tokens * stride, 2, -2, 2);
  const auto rf = testing::RandomF32(tokens * stride, 3);
  std::vector<double> x(xf.begin(), xf.end()), proj(rf.begin(), rf.end());
  const int32_t positions[] = {5, 0, 17};
  const auto loss = [&](const std::vector<double>& xv) {
    std::vector<double> y(tokens * stride);
    ref::Rope(tokens, heads, hd, stride, positions, 2, kTheta, 1.0, xv.data(), y.data());
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += y[i] * proj[i];
    return l;
  };
  std::vector<double> grad(tokens * stride);
  ref::Rope(tokens, heads, hd, stride, positions, 2, kTheta, -1.0, proj.data(), grad.data());
  for (size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-6 * std::max(1.0, std::abs(x[i]));
    const double keep = x[i];
    x[i] = keep + h;
    const double up = loss(x);
    x[i] = keep - h;
    const double down = loss(x);
    x[i] = keep;
    EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6) << "i " << i;
  }
}

// Decode (one token at a time, position_offset = its index) and packed
// documents (positions restart) give the training pass's bits exactly.
TYPED_TEST(RopeTest, DecodeAndPackedPositionsMatchTrainingBitwise) {
  using T = TypeParam;
  const int64_t tokens = 7, heads = 4, hd = 64, stride = heads * hd;
  const Table table(hd, 500000.0);
  const auto x0 = Random<T>(tokens * stride, 4, -3, 3);
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    const KernelCtx& ctx = Ctx(isa, 2);
    std::vector<T> full = x0;
    RopeForward(ctx, table.view, tokens, heads, stride, nullptr, 0, full.data());
    std::vector<T> decode = x0;
    for (int64_t t = 0; t < tokens; ++t) {
      RopeForward(ctx, table.view, 1, heads, stride, nullptr, t, decode.data() + t * stride);
    }
    EXPECT_TRUE(SameBits(full, decode));
    // Two documents packed in one row: [0, 1, 2] and [0, 1, 2, 3].
    const int32_t packed_pos[] = {0, 1, 2, 0, 1, 2, 3};
    std::vector<T> packed = x0, separate = x0;
    RopeForward(ctx, table.view, tokens, heads, stride, packed_pos, 0, packed.data());
    RopeForward(ctx, table.view, 3, heads, stride, nullptr, 0, separate.data());
    RopeForward(ctx, table.view, 4, heads, stride, nullptr, 0, separate.data() + 3 * stride);
    EXPECT_TRUE(SameBits(packed, separate));
  }
}

TYPED_TEST(RopeTest, DeterministicOverRunsAndThreadCounts) {
  using T = TypeParam;
  const int64_t tokens = 33, heads = 5, hd = 128, stride = heads * hd;
  const Table table(hd);
  const auto x0 = Random<T>(tokens * stride, 5, -3, 3);
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<T> first;
    for (int threads : {1, 2, 2}) {
      std::vector<T> x = x0;
      RopeForward(Ctx(isa, threads), table.view, tokens, heads, stride, nullptr, 3, x.data());
      RopeBackward(Ctx(isa, threads), table.view, tokens, heads, stride, nullptr, 1, x.data());
      if (first.empty()) {
        first = x;
      } else {
        EXPECT_TRUE(SameBits(x, first)) << threads << " threads";
      }
    }
  }
}

TEST(RopeDeathTest, ChecksPositionsAndShapes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Table table(8);
  std::vector<float> x(3 * 8);
  const KernelCtx& ctx = Ctx(Isa::kScalar, 1);
  const int32_t bad[] = {0, 70, 1};
  EXPECT_DEATH(RopeForward(ctx, table.view, 3, 1, 8, bad, 0, x.data()), "token 1 has position 70");
  EXPECT_DEATH(RopeForward(ctx, table.view, 3, 1, 8, nullptr, kMaxPositions - 2, x.data()),
               "token 2 has position 64");
  EXPECT_DEATH(RopeForward(ctx, table.view, 3, 2, 8, nullptr, 0, x.data()), "token_stride");
  EXPECT_DEATH(RopeTableFloats(4, 7), "even");
}

}  // namespace
}  // namespace anvil::kernels
