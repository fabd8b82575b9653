// AdamW (optim.h): every tier bitwise equal to the plain f32 loop of the
// documented formula order (this file is compiled with -ffp-contract=off, so
// that loop rounds exactly as written), within derived bounds of the double
// oracle, on 1 and 2 threads, for both lerp branches, sizes around every block.
#include "anvil/kernels/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "anvil/kernels/ref/optim_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

using testing::Ctx;
using testing::kU;
using testing::RandomF32;
using testing::SameBits;
using testing::SupportedIsas;

struct State {
  std::vector<float> p, g, m, v;
};

State MakeState(int64_t n, uint32_t seed) {
  State s{RandomF32(n, seed, -1, 1), RandomF32(n, seed + 1, -1e-2f, 1e-2f),
          RandomF32(n, seed + 2, -1e-2f, 1e-2f), RandomF32(n, seed + 3, 0, 1e-4f)};
  s.p[0] = 0.0f;  // an edge: zero weight, zero moments, zero gradient
  s.g[0] = 0.0f;
  s.m[0] = 0.0f;
  s.v[0] = 0.0f;
  return s;
}

// optim.h's formula, one element at a time, in plain f32.
void PlainF32Step(const AdamWHyper& h, int64_t step, float grad_scale, State& s,
                  std::vector<BF16>* bf16) {
  const double bc1 = 1 - std::pow(h.beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(h.beta2, static_cast<double>(step));
  const float decay = static_cast<float>(1 - h.lr * h.weight_decay);
  const float w1 = static_cast<float>(1 - h.beta1), b2 = static_cast<float>(h.beta2);
  const float w2 = static_cast<float>(1 - h.beta2), eps = static_cast<float>(h.eps);
  const float step_size = static_cast<float>(-(h.lr / bc1));
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  for (size_t i = 0; i < s.p.size(); ++i) {
    const float g = s.g[i] * grad_scale;
    float p = s.p[i] * decay;
    float m = w1 < 0.5f ? std::fma(w1, g - s.m[i], s.m[i]) : std::fma(w1 - 1.0f, g - s.m[i], g);
    float v = s.v[i] * b2 + (w2 * g) * g;
    p = p + (step_size * m) / (std::sqrt(v) / bc2_sqrt + eps);
    s.p[i] = p;
    s.m[i] = m;
    s.v[i] = v;
    if (bf16 != nullptr) (*bf16)[i] = ToBF16(p);
  }
}

const AdamWHyper kHypers[] = {
    {.lr = 3e-4, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1},
    {.lr = 1e-2,
     .beta1 = 0.3,
     .beta2 = 0.999,
     .eps = 1e-6,
     .weight_decay = 0.0},  // other lerp branch
};
const int64_t kSizes[] = {1, 7, 16, 17, 100, 16384 + 5, 3 * 16384 + 31};

TEST(AdamW, EveryTierIsBitwiseThePlainF32Formula) {
  for (Isa isa : SupportedIsas()) {
    for (const AdamWHyper& h : kHypers) {
      for (int64_t n : kSizes) {
        for (int64_t step : {1, 1000}) {
          for (int threads : {1, 2}) {
            for (bool with_bf16 : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << IsaName(isa) << " beta1 " << h.beta1 << " n " << n << " step " << step
                           << " threads " << threads << " bf16 " << with_bf16);
              State got = MakeState(n, 10), want = got;
              std::vector<BF16> got_bf16(n), want_bf16(n);
              AdamWUpdate(Ctx(isa, threads), h, step, 0.5f, n, got.p.data(), got.g.data(),
                          got.m.data(), got.v.data(), with_bf16 ? got_bf16.data() : nullptr);
              PlainF32Step(h, step, 0.5f, want, with_bf16 ? &want_bf16 : nullptr);
              ASSERT_TRUE(SameBits(got.p, want.p));
              ASSERT_TRUE(SameBits(got.m, want.m));
              ASSERT_TRUE(SameBits(got.v, want.v));
              ASSERT_TRUE(SameBits(got.g, want.g));  // grad is read only
              if (with_bf16) {
                ASSERT_TRUE(SameBits(got_bf16, want_bf16));
              }
            }
          }
        }
      }
    }
  }
}

// Against the double oracle, one step from the same f32 state. First-order
// bounds: m: the scaled g (u), g - m, the fma and w1's rounding: 4u (|m0| + |g|).
// v: positive terms, b2, w2 rounded and three products, one add: 6u v.
// p: decay rounded and the product: 2u |p0|; the update s m / denom carries
// m's bound, denom's 7u (sqrt of v: 3u + u, / bc2: 2u, + eps: u) and s, the
// product and the division: 10u |update|; the final add u |p|. Twice that.
TEST(AdamW, MatchesDoubleReference) {
  for (Isa isa : SupportedIsas()) {
    for (const AdamWHyper& h : kHypers) {
      for (int64_t step : {1, 10, 1000}) {
        SCOPED_TRACE(::testing::Message()
                     << IsaName(isa) << " beta1 " << h.beta1 << " step " << step);
        const int64_t n = 1000;
        const float scale = 0.75f;
        State s = MakeState(n, 20);
        std::vector<double> p(s.p.begin(), s.p.end()), g(s.g.begin(), s.g.end()),
            m(s.m.begin(), s.m.end()), v(s.v.begin(), s.v.end());
        const State start = s;
        AdamWUpdate(Ctx(isa, 2), h, step, scale, n, s.p.data(), s.g.data(), s.m.data(), s.v.data(),
                    nullptr);
        ref::AdamWUpdate(h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, step, scale, n, p.data(),
                         g.data(), m.data(), v.data());
        const double bc1 = 1 - std::pow(h.beta1, step), bc2 = 1 - std::pow(h.beta2, step);
        for (int64_t i = 0; i < n; ++i) {
          const double gi = double{start.g[i]} * scale;
          const double m_bound = 4 * kU * (std::abs(start.m[i]) + std::abs(gi));
          ASSERT_LE(std::abs(s.m[i] - m[i]), 2 * m_bound) << "m " << i;
          ASSERT_LE(std::abs(s.v[i] - v[i]), 2 * 6 * kU * v[i]) << "v " << i;
          const double denom = std::sqrt(v[i]) / std::sqrt(bc2) + h.eps;
          const double update = h.lr / bc1 * m[i] / denom;
          const double p_bound = 2 * kU * std::abs(start.p[i]) + h.lr / bc1 / denom * m_bound +
                                 10 * kU * std::abs(update) + kU * std::abs(p[i]);
          ASSERT_LE(std::abs(s.p[i] - p[i]), 2 * p_bound) << "p " << i;
        }
      }
    }
  }
}

TEST(AdamWDeathTest, ChecksArguments) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  State s = MakeState(4, 1);
  EXPECT_DEATH(AdamWUpdate(Ctx(Isa::kScalar, 1), {}, 0, 1.0f, 4, s.p.data(), s.g.data(), s.m.data(),
                           s.v.data(), nullptr),
               "step");
  EXPECT_DEATH(AdamWUpdate(Ctx(Isa::kScalar, 1), {.beta1 = 1.0}, 1, 1.0f, 4, s.p.data(), s.g.data(),
                           s.m.data(), s.v.data(), nullptr),
               "beta1");
}

}  // namespace
}  // namespace anvil::kernels
