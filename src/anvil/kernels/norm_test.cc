// RMSNorm (norm.h): every tier vs the double oracle with error bounds derived
// below, the oracle's backward vs finite differences, bitwise determinism over
// runs and thread counts, batch invariance, aliasing, and edge shapes.
#include "anvil/kernels/norm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/kernels/ref/norm_ref.h"
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

constexpr float kEps = 1e-5f;

// Sizes around every block: 1 lane, 8 and 16 lanes, 4-vector groups, and
// primes.
const int64_t kDims[] = {1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 127, 129, 263, 1031};
const int64_t kRows[] = {1, 3, 13};

template <typename T>
class RmsNormTest : public ::testing::Test {};
using ElementTypes = ::testing::Types<float, BF16>;
TYPED_TEST_SUITE(RmsNormTest, ElementTypes);

// Forward error bound (first order, relative to |y|): the sum of squares has
// dim rounded additions of non-negative terms (<= dim u); mean, + eps, sqrt
// (halves it), 1/x add 4u: rstd is within (dim/2 + 4) u; x * rstd * w adds 2u.
// A bf16 y adds its own rounding, 2^-8.
TYPED_TEST(RmsNormTest, ForwardMatchesReference) {
  using T = TypeParam;
  for (Isa isa : SupportedIsas()) {
    for (int64_t dim : kDims) {
      for (int64_t rows : kRows) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " rows " << rows << " dim " << dim);
        const auto x = Random<T>(rows * dim, 1, -2.0f, 2.0f);
        const auto w = Random<float>(dim, 2, 0.5f, 1.5f);
        std::vector<T> y(rows * dim);
        std::vector<float> rstd(rows);
        RmsNormForward(Ctx(isa, 2), rows, dim, x.data(), w.data(), kEps, y.data(), rstd.data());
        std::vector<double> y_ref(rows * dim), rstd_ref(rows);
        ref::RmsNormForward(rows, dim, x.data(), w.data(), kEps, y_ref.data(), rstd_ref.data());
        const double rstd_tol = (dim / 2.0 + 4) * kU;
        const double y_tol = (dim / 2.0 + 8) * kU + (StorageU<T>() == kU ? 0.0 : StorageU<T>());
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_LE(std::abs(rstd[r] - rstd_ref[r]), rstd_tol * rstd_ref[r]) << "row " << r;
        }
        for (int64_t i = 0; i < rows * dim; ++i) {
          ASSERT_LE(std::abs(AsDouble(y[i]) - y_ref[i]), y_tol * std::abs(y_ref[i])) << "i " << i;
        }
      }
    }
  }
}

// Backward error bound per element, from the first-order error of each factor:
//   rstd * g  (g = w dy):     (dim/2 + 6) u |rstd g|
//   k x, k = s/dim rstd^3:    |x| (rstd^3/dim * dim u sum|g x| + (3 dim/2 + 14) u |k|)
//   the final fused op:       u |dx|        (+ 2^-8 |dx| when dx is bf16)
// dweight: each term (dy x) rstd within (dim/2 + 6) u, `rows` additions over
// sum|terms|, and the final += one more u. Tolerances are twice these bounds.
TYPED_TEST(RmsNormTest, BackwardMatchesReference) {
  using T = TypeParam;
  for (Isa isa : SupportedIsas()) {
    std::vector<std::pair<int64_t, int64_t>> shapes;  // (rows, dim)
    for (int64_t dim : kDims) {
      for (int64_t rows : kRows) shapes.emplace_back(rows, dim);
    }
    shapes.emplace_back(257, 1031);  // several row blocks in backward
    for (const auto& [rows, dim] : shapes) {
      {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " rows " << rows << " dim " << dim);
        const auto x = Random<T>(rows * dim, 3, -2.0f, 2.0f);
        const auto w = Random<float>(dim, 4, 0.5f, 1.5f);
        const auto dy = Random<T>(rows * dim, 5);
        const auto dw0 = Random<float>(dim, 6);  // dweight accumulates into this
        std::vector<T> y(rows * dim), dx(rows * dim);
        std::vector<float> rstd(rows), dw = dw0;
        const KernelCtx& ctx = Ctx(isa, 2);
        RmsNormForward(ctx, rows, dim, x.data(), w.data(), kEps, y.data(), rstd.data());
        RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                        dw.data());

        std::vector<double> dx_ref(rows * dim), dw_ref(dw0.begin(), dw0.end());
        std::vector<double> y_ref(rows * dim), rs_ref(rows);
        ref::RmsNormForward(rows, dim, x.data(), w.data(), kEps, y_ref.data(), rs_ref.data());
        ref::RmsNormBackward(rows, dim, x.data(), w.data(), double{kEps}, dy.data(), dx_ref.data(),
                             dw_ref.data());
        const double out_u = StorageU<T>() == kU ? 0.0 : StorageU<T>();
        std::vector<double> dw_abs(dim, 0.0);
        for (int64_t r = 0; r < rows; ++r) {
          const double rs = rs_ref[r];
          double s = 0, s_abs = 0;
          for (int64_t c = 0; c < dim; ++c) {
            const double gx = w[c] * AsDouble(dy[r * dim + c]) * AsDouble(x[r * dim + c]);
            s += gx;
            s_abs += std::abs(gx);
          }
          const double k = s / dim * rs * rs * rs;
          for (int64_t c = 0; c < dim; ++c) {
            const int64_t i = r * dim + c;
            const double g = w[c] * AsDouble(dy[i]);
            const double xi = AsDouble(x[i]);
            const double bound =
                (dim / 2.0 + 6) * kU * std::abs(rs * g) +
                std::abs(xi) * (rs * rs * rs * kU * s_abs + (1.5 * dim + 14) * kU * std::abs(k)) +
                (kU + out_u) * std::abs(dx_ref[i]);
            ASSERT_LE(std::abs(AsDouble(dx[i]) - dx_ref[i]), 2 * bound) << "r " << r << " c " << c;
            dw_abs[c] += std::abs(AsDouble(dy[i]) * xi * rs);
          }
        }
        for (int64_t c = 0; c < dim; ++c) {
          const double bound = (dim / 2.0 + 6 + rows) * kU * dw_abs[c] + kU * std::abs(dw_ref[c]);
          ASSERT_LE(std::abs(dw[c] - dw_ref[c]), 2 * bound) << "dweight c " << c;
        }
      }
    }
  }
}

// dweight is specified bit for bit (norm.h): the plain row-order loop, on 1,
// 2 and 3 threads, over enough rows to span several of backward's blocks of
// rows, and (dim 8200) several of its steps of columns, or fewer blocks than
// threads (4 rows); dx the same bits on every thread count.
TYPED_TEST(RmsNormTest, DweightIsThePlainRowOrderSum) {
  using T = TypeParam;
  ThreadPool pool3(3);
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{300, 1031}, {40, 8200}, {4, 1031}}) {
    const auto x = Random<T>(rows * dim, 19, -2, 2);
    const auto w = Random<float>(dim, 20);
    const auto dy = Random<T>(rows * dim, 21);
    const auto rstd = Random<float>(rows, 22, 0.5f, 2.0f);
    std::vector<float> want = Random<float>(dim, 23);
    const std::vector<float> start = want;
    for (int64_t c = 0; c < dim; ++c) {
      float acc = 0.0f;
      for (int64_t r = 0; r < rows; ++r) {
        const float p = static_cast<float>(AsDouble(dy[r * dim + c])) *
                        static_cast<float>(AsDouble(x[r * dim + c]));
        acc = std::fma(p, rstd[r], acc);
      }
      want[c] = want[c] + acc;
    }
    for (Isa isa : SupportedIsas()) {
      const KernelCtx ctx3(pool3, isa);
      std::vector<T> dx_one_thread;
      for (int threads : {1, 2, 3}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " " << threads << " threads, rows "
                                          << rows << " dim " << dim);
        std::vector<float> dw = start;
        std::vector<T> dx(rows * dim);
        RmsNormBackward(threads == 3 ? ctx3 : Ctx(isa, threads), rows, dim, x.data(), w.data(),
                        rstd.data(), dy.data(), dx.data(), dw.data());
        EXPECT_TRUE(SameBits(dw, want));
        if (threads == 1) dx_one_thread = dx;
        EXPECT_TRUE(SameBits(dx, dx_one_thread));
      }
    }
  }
}

// Backward's threads wait on one another (dweight's sums go from block to
// block); where the pool runs them one after another (a call from inside a
// pool job), the results are the same bits, with no deadlock.
TYPED_TEST(RmsNormTest, BackwardInsideAPoolJob) {
  using T = TypeParam;
  const int64_t rows = 200, dim = 1031;
  const auto x = Random<T>(rows * dim, 24, -2, 2);
  const auto w = Random<float>(dim, 25);
  const auto dy = Random<T>(rows * dim, 26);
  const auto rstd = Random<float>(rows, 27, 0.5f, 2.0f);
  for (Isa isa : SupportedIsas()) {
    const KernelCtx& ctx = Ctx(isa, 2);
    std::vector<T> dx(rows * dim), dx_nested(rows * dim);
    std::vector<float> dw(dim, 0.5f), dw_nested(dim, 0.5f);
    RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                    dw.data());
    ctx.pool().RunOnAll([&](int t) {
      if (t != 0) return;
      RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx_nested.data(),
                      dw_nested.data());
    });
    EXPECT_TRUE(SameBits(dx, dx_nested)) << IsaName(isa);
    EXPECT_TRUE(SameBits(dw, dw_nested)) << IsaName(isa);
  }
}

// Central differences of the oracle's forward in double, L = sum(y * R):
// step h = 1e-6 (relative); truncation O(h^2) ~ 1e-12 and cancellation
// ~ 1e-16 |L| / h ~ 1e-9, so 1e-6 of the largest gradient is ample.
TEST(RmsNormReference, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 3, dim = 7;
  const double eps = 1e-3;  // large enough to matter in the derivative
  std::vector<double> x(rows * dim), w(dim), proj(rows * dim);
  const auto xf = testing::RandomF32(rows * dim, 7, -2, 2);
  const auto wf = testing::RandomF32(dim, 8, 0.5f, 1.5f);
  const auto pf = testing::RandomF32(rows * dim, 9);
  std::copy(xf.begin(), xf.end(), x.begin());
  std::copy(wf.begin(), wf.end(), w.begin());
  std::copy(pf.begin(), pf.end(), proj.begin());
  const auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
    std::vector<double> y(rows * dim), rs(rows);
    ref::RmsNormForward(rows, dim, xv.data(), wv.data(), eps, y.data(), rs.data());
    double l = 0;
    for (int64_t i = 0; i < rows * dim; ++i) l += y[i] * proj[i];
    return l;
  };
  std::vector<double> dx(rows * dim), dw(dim, 0.0);
  ref::RmsNormBackward(rows, dim, x.data(), w.data(), eps, proj.data(), dx.data(), dw.data());
  const auto check = [&](std::vector<double>& v, const std::vector<double>& grad, bool is_x) {
    const double scale = *std::max_element(
        grad.begin(), grad.end(), [](double a, double b) { return std::abs(a) < std::abs(b); });
    for (size_t i = 0; i < v.size(); ++i) {
      const double h = 1e-6 * std::max(1.0, std::abs(v[i]));
      const double keep = v[i];
      v[i] = keep + h;
      const double up = is_x ? loss(v, w) : loss(x, v);
      v[i] = keep - h;
      const double down = is_x ? loss(v, w) : loss(x, v);
      v[i] = keep;
      EXPECT_NEAR((up - down) / (2 * h), grad[i], 1e-6 * std::abs(scale))
          << (is_x ? "dx " : "dw ") << i;
    }
  };
  check(x, dx, true);
  check(w, dw, false);
}

// Same inputs -> same bits: twice, and on 1 vs 2 threads (dweight included).
TYPED_TEST(RmsNormTest, DeterministicOverRunsAndThreadCounts) {
  using T = TypeParam;
  const int64_t rows = 37, dim = 1031;
  const auto x = Random<T>(rows * dim, 10, -3, 3);
  const auto w = Random<float>(dim, 11);
  const auto dy = Random<T>(rows * dim, 12);
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    std::vector<T> first_y, first_dx;
    std::vector<float> first_rstd, first_dw;
    for (int threads : {1, 2, 2}) {
      std::vector<T> y(rows * dim), dx(rows * dim);
      std::vector<float> rstd(rows), dw(dim, 0.25f);
      const KernelCtx& ctx = Ctx(isa, threads);
      RmsNormForward(ctx, rows, dim, x.data(), w.data(), kEps, y.data(), rstd.data());
      RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                      dw.data());
      if (first_y.empty()) {
        first_y = y, first_dx = dx, first_rstd = rstd, first_dw = dw;
        continue;
      }
      EXPECT_TRUE(SameBits(y, first_y)) << threads << " threads";
      EXPECT_TRUE(SameBits(dx, first_dx)) << threads << " threads";
      EXPECT_TRUE(SameBits(rstd, first_rstd)) << threads << " threads";
      EXPECT_TRUE(SameBits(dw, first_dw)) << threads << " threads";
    }
  }
}

// A row's y, rstd and dx are bitwise the same alone and inside a batch
// large enough (x past the L2s, even in bf16) that forward asks for rows
// ahead and backward runs several blocks of rows.
TYPED_TEST(RmsNormTest, BatchInvariant) {
  using T = TypeParam;
  const int64_t dim = 1031;
  const int64_t rows = rowwise_internal::kL2Bytes / (dim * int64_t{sizeof(BF16)}) + 64;
  const auto x = Random<T>(rows * dim, 13, -3, 3);
  const auto w = Random<float>(dim, 14);
  const auto dy = Random<T>(rows * dim, 15);
  for (Isa isa : SupportedIsas()) {
    SCOPED_TRACE(IsaName(isa));
    const KernelCtx& ctx = Ctx(isa, 2);
    std::vector<T> y(rows * dim), dx(rows * dim);
    std::vector<float> rstd(rows), dw(dim);
    RmsNormForward(ctx, rows, dim, x.data(), w.data(), kEps, y.data(), rstd.data());
    RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                    dw.data());
    for (int64_t r : {int64_t{0}, int64_t{4}, rows - 1}) {
      std::vector<T> y1(dim), dx1(dim);
      float rstd1 = 0;
      RmsNormForward(ctx, 1, dim, x.data() + r * dim, w.data(), kEps, y1.data(), &rstd1);
      RmsNormBackward(ctx, 1, dim, x.data() + r * dim, w.data(), &rstd1, dy.data() + r * dim,
                      dx1.data(), dw.data());
      EXPECT_TRUE(SameBits(y1, std::vector<T>(y.begin() + r * dim, y.begin() + (r + 1) * dim)));
      EXPECT_TRUE(SameBits(dx1, std::vector<T>(dx.begin() + r * dim, dx.begin() + (r + 1) * dim)));
      EXPECT_EQ(std::bit_cast<uint32_t>(rstd1), std::bit_cast<uint32_t>(rstd[r]));
    }
  }
}

// y may overwrite x and dx may overwrite dy, with the same bits: one block
// of rows in backward, and several.
TYPED_TEST(RmsNormTest, InPlace) {
  using T = TypeParam;
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{5, 129}, {300, 1031}}) {
    const auto x = Random<T>(rows * dim, 16, -3, 3);
    const auto w = Random<float>(dim, 17);
    const auto dy = Random<T>(rows * dim, 18);
    for (Isa isa : SupportedIsas()) {
      SCOPED_TRACE(::testing::Message() << IsaName(isa) << " rows " << rows);
      const KernelCtx& ctx = Ctx(isa, 2);
      std::vector<T> y(rows * dim), dx(rows * dim), inout = x, dinout = dy;
      std::vector<float> rstd(rows), dw(dim), dw2(dim);
      RmsNormForward(ctx, rows, dim, x.data(), w.data(), kEps, y.data(), rstd.data());
      RmsNormForward(ctx, rows, dim, inout.data(), w.data(), kEps, inout.data(), nullptr);
      EXPECT_TRUE(SameBits(y, inout));
      RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dy.data(), dx.data(),
                      dw.data());
      RmsNormBackward(ctx, rows, dim, x.data(), w.data(), rstd.data(), dinout.data(), dinout.data(),
                      dw2.data());
      EXPECT_TRUE(SameBits(dx, dinout));
      EXPECT_TRUE(SameBits(dw, dw2));
    }
  }
}

TEST(RmsNormDeathTest, ChecksArguments) {
  const std::vector<float> x(4), w(4);
  std::vector<float> y(4), rstd(1);
  const KernelCtx& ctx = Ctx(Isa::kScalar, 1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(RmsNormForward(ctx, 1, 0, x.data(), w.data(), kEps, y.data(), rstd.data()), "dim");
  EXPECT_DEATH(RmsNormForward(ctx, 1, 4, x.data(), w.data(), -1.0f, y.data(), rstd.data()), "eps");
  EXPECT_DEATH(RmsNormBackward(ctx, 1, 4, x.data(), w.data(), rstd.data(), y.data(),
                               const_cast<float*>(x.data()), y.data()),
               "alias");
}

}  // namespace
}  // namespace anvil::kernels
