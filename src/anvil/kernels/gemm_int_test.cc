// The integer GEMMs (W8A8, W4A8) on every tier, 1 and 2 threads, with and
// without accumulate, at edge shapes (k not a multiple of 4, 8 or 128; n not
// a multiple of 16, nor whole groups of 4 panels; row counts across the
// tiers' row tiles, one panel and the wide 4-panel tiles; on a CPU with AMX
// the avx512 tier with and without the tiles):
// - the weights' codes and scales equal the scalar oracle's (ref/gemm_int_ref.h),
// - y equals the oracle bit for bit (the sums are exact integers and the
//   epilogue has one order), so batch invariance and thread independence hold,
// - y is within the quantization's own error bound of the exact product:
//   |y - x·w| <= sum_k (|x| s_w / 2 + |w| s_a / 2 + s_a s_w / 4) + f32 slack,
// - a row with an Inf gives NaN outputs in that row only; a zero row gives 0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/kernels/gemm_int.h"
#include "anvil/kernels/ref/gemm_int_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

using testing::Ctx;
using testing::SupportedIsas;

// x [rows, cols] with per-row magnitudes 2^-4..2^4 and a few large entries.
std::vector<float> Data(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-4, 4);
  std::vector<float> x(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = std::ldexp(1.0f, e(rng));
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = normal(rng) * s;
  }
  return x;
}

std::string Name(IntBits bits) { return bits == IntBits::kInt8 ? "w8a8" : "w4a8"; }

bool SameBits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// y = GemmInt(x, w) through the public API (y0 as the accumulate start),
// the rows quantized for these weights as a model does (only the codes the
// call reads: int4 never reads the unsigned ones); the rows with every code
// give the same bits.
std::vector<float> RunGemm(const KernelCtx& ctx, int64_t m, int64_t k, const std::vector<float>& x,
                           const IntWeights& w, const std::vector<float>* y0) {
  AlignedBuffer memory(IntRowsBytes(m, k)), all_memory(IntRowsBytes(m, k));
  const IntRows a = QuantizeRowsInt8(ctx, m, k, x.data(), 0, memory.data(), &w);
  EXPECT_TRUE(a.q != nullptr || a.q_u8 != nullptr);
  if (w.bits() == IntBits::kInt4) {
    EXPECT_TRUE(a.q != nullptr && a.q_u8 == nullptr);
  }
  const IntRows all = QuantizeRowsInt8(ctx, m, k, x.data(), 0, all_memory.data());
  std::vector<float> y = y0 != nullptr ? *y0 : std::vector<float>(m * w.n(), -7.0f);
  std::vector<float> y_all = y;
  GemmInt(ctx, a, w, y.data(), 0, y0 != nullptr);
  GemmInt(ctx, all, w, y_all.data(), 0, y0 != nullptr);
  for (size_t i = 0; i < y.size(); ++i) {
    if (!SameBits(y[i], y_all[i])) {
      ADD_FAILURE() << "rows for the weights and rows with every code differ at " << i;
      break;
    }
  }
  return y;
}

struct Shape {
  int64_t k, n;
};
const Shape kShapes[] = {{1, 1},     {5, 17},    {128, 16}, {300, 33},
                         {1376, 40}, {129, 100}, {200, 60}, {1376, 100}};

TEST(GemmIntTest, WeightsMatchTheOracle) {
  for (IntBits bits : {IntBits::kInt8, IntBits::kInt4}) {
    for (const Shape& s : kShapes) {
      const std::vector<float> w = Data(s.k, s.n, 11);
      const IntWeights q = QuantizeWeightsInt(Ctx(Isa::kScalar, 2), s.k, s.n, w.data(), 0, bits);
      const ref::IntWeightsRef r = ref::QuantizeWeightsRef(s.k, s.n, w.data(), bits);
      ASSERT_EQ(q.groups(), r.groups);
      for (int64_t kk = 0; kk < s.k; ++kk) {
        for (int64_t j = 0; j < s.n; ++j) {
          ASSERT_EQ(q.Code(kk, j), r.codes[kk * s.n + j]) << Name(bits) << " k " << kk << " j " << j;
        }
      }
      for (int64_t g = 0; g < r.groups; ++g) {
        for (int64_t j = 0; j < s.n; ++j) ASSERT_EQ(q.Scale(g, j), r.scales[g * s.n + j]);
      }
    }
  }
}

TEST(GemmIntTest, BitwiseTheOracleOnEveryTierWithinTheQuantizationBound) {
  for (IntBits bits : {IntBits::kInt8, IntBits::kInt4}) {
    for (const Shape& s : kShapes) {
      const std::vector<float> wf = Data(s.k, s.n, 3);
      const ref::IntWeightsRef wr = ref::QuantizeWeightsRef(s.k, s.n, wf.data(), bits);
      // 400 rows of K = 1376 through GemmInt's row chunks (160 to 184 rows
      // there), with 100 columns through the wide kernels (groups of 4
      // panels; AMX's of 2 panels x 32 rows: 37 and 50 rows leave 5 and 18,
      // a half tile and 2 rows, to the VNNI kernels).
      for (int64_t m : {1, 3, 8, 9, 37, 50, 400}) {
        if (m == 400 && (s.k < 1000 || s.n < 64)) continue;
        const std::vector<float> x = Data(m, s.k, 5 + static_cast<uint32_t>(m));
        const std::vector<float> y0 = Data(m, s.n, 7);
        const std::vector<float> want = ref::GemmIntRef(m, s.n, s.k, x.data(), wr, nullptr);
        const std::vector<float> want_acc = ref::GemmIntRef(m, s.n, s.k, x.data(), wr, &y0);
        // The quantization's bound against the exact product.
        for (int64_t i = 0; i < m; ++i) {
          const ref::IntBlock a = ref::QuantizeIntBlock(x.data() + i * s.k, s.k, 1, 127);
          for (int64_t j = 0; j < s.n; ++j) {
            double exact = 0, bound = 0, mass = 0;
            for (int64_t kk = 0; kk < s.k; ++kk) {
              const double xv = x[i * s.k + kk], wv = wf[kk * s.n + j];
              const double sw = wr.scales[(kk / wr.group) * s.n + j];
              exact += xv * wv;
              mass += std::fabs(xv * wv);
              bound += std::fabs(xv) * sw / 2 + std::fabs(wv) * a.scale / 2 + a.scale * sw / 4;
            }
            bound += 1e-5 * (mass + bound);
            ASSERT_LE(std::fabs(want[i * s.n + j] - exact), bound)
                << Name(bits) << " k " << s.k << " n " << s.n << " m " << m;
          }
        }
        for (const testing::GemmTier& tier : testing::GemmTiers()) {
          const Isa isa = tier.isa;
          for (int threads : {1, 2}) {
            const KernelCtx& ctx = Ctx(isa, threads, tier.amx);
            const IntWeights w = QuantizeWeightsInt(ctx, s.k, s.n, wf.data(), 0, bits);
            const std::vector<float> got = RunGemm(ctx, m, s.k, x, w, nullptr);
            const std::vector<float> got_acc = RunGemm(ctx, m, s.k, x, w, &y0);
            for (int64_t e = 0; e < m * s.n; ++e) {
              ASSERT_TRUE(SameBits(got[e], want[e]))
                  << Name(bits) << " " << tier.Name() << " t" << threads << " k " << s.k << " n "
                  << s.n << " m " << m << " element " << e << ": " << got[e] << " vs " << want[e];
              ASSERT_TRUE(SameBits(got_acc[e], want_acc[e]))
                  << Name(bits) << " accumulate " << tier.Name() << " m " << m << " e " << e;
            }
          }
        }
      }
    }
  }
}

TEST(GemmIntTest, NonFiniteRowsGiveNaNAndZeroRowsZero) {
  const int64_t m = 3, k = 200, n = 20;
  std::vector<float> x = Data(m, k, 1);
  x[0 * k + 17] = std::numeric_limits<float>::infinity();
  for (int64_t kk = 0; kk < k; ++kk) x[2 * k + kk] = 0.0f;
  const std::vector<float> wf = Data(k, n, 2);
  for (IntBits bits : {IntBits::kInt8, IntBits::kInt4}) {
    for (Isa isa : SupportedIsas()) {
      const KernelCtx& ctx = Ctx(isa, 1);
      const IntWeights w = QuantizeWeightsInt(ctx, k, n, wf.data(), 0, bits);
      const std::vector<float> y = RunGemm(ctx, m, k, x, w, nullptr);
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_TRUE(std::isnan(y[0 * n + j])) << Name(bits) << " " << IsaName(isa);
        EXPECT_TRUE(std::isfinite(y[1 * n + j]));
        EXPECT_EQ(y[2 * n + j], 0.0f);
      }
    }
  }
}

// The activation rows every tier quantizes: the scalar tier's codes, offset
// codes, scales and group sums, bit for bit, on rows of ragged lengths with
// ties (x * inv at n + 1/2), signed zeros, a non-finite value, all zeros, an
// amax whose inverse overflows, and values near f32's largest.
TEST(GemmIntTest, ActivationRowsEqualTheScalarTiersOnEveryTier) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const int64_t k : {1, 7, 16, 33, 100, 128, 129, 300, 1000}) {
    const int64_t m = 8;
    std::vector<float> x = Data(m, k, 13 + static_cast<uint32_t>(k));
    for (int64_t kk = 0; kk < k; ++kk) {
      // Row 1: amax 127 (inv 1) with ties and signed zeros.
      const float ties[] = {0.5f, -0.5f, 1.5f, -2.5f, 126.5f, -126.5f, 0.0f, -0.0f, 3.25f};
      x[1 * k + kk] = kk == 0 ? 127.0f : ties[kk % 9];
      x[3 * k + kk] = 0.0f;                             // all zeros
      x[4 * k + kk] = kk % 3 == 0 ? 1e-39f : 0.0f;      // 127 / amax overflows
      x[5 * k + kk] = (kk % 2 == 0 ? 3e38f : -1e38f);   // near the largest
      x[6 * k + kk] = std::ldexp(x[6 * k + kk], -100);  // tiny but normal
    }
    x[2 * k + k / 2] = k % 2 == 0 ? inf : std::nanf("");  // non-finite
    const KernelCtx& scalar = Ctx(Isa::kScalar, 1);
    AlignedBuffer want_mem(IntRowsBytes(m, k));
    const IntRows want = QuantizeRowsInt8(scalar, m, k, x.data(), 0, want_mem.data());
    const int64_t groups = (k + kInt4Group - 1) / kInt4Group;
    for (const Isa isa : SupportedIsas()) {
      AlignedBuffer got_mem(IntRowsBytes(m, k));
      const IntRows got = QuantizeRowsInt8(Ctx(isa, 2), m, k, x.data(), 0, got_mem.data());
      ASSERT_EQ(got.ld, want.ld);
      const std::string where = std::string(IsaName(isa)) + " k " + std::to_string(k);
      EXPECT_EQ(std::memcmp(got.q, want.q, m * want.ld), 0) << where;
      EXPECT_EQ(std::memcmp(got.q_u8, want.q_u8, m * want.ld), 0) << where;
      EXPECT_EQ(std::memcmp(got.scales, want.scales, m * 4), 0) << where;
      EXPECT_EQ(std::memcmp(got.group_sums, want.group_sums, m * groups * 4), 0) << where;
    }
  }
}

TEST(GemmIntTest, PackedBytesAreWhatADecodeStreams) {
  const std::vector<float> wf = Data(1024, 64, 9);
  const KernelCtx& ctx = Ctx(Isa::kScalar, 1);
  const IntWeights w8 = QuantizeWeightsInt(ctx, 1024, 64, wf.data(), 0, IntBits::kInt8);
  const IntWeights w4 = QuantizeWeightsInt(ctx, 1024, 64, wf.data(), 0, IntBits::kInt4);
  EXPECT_EQ(w8.bytes(), 1024 * 64 + 64 * 4 * 2);      // codes, scales, column sums
  EXPECT_EQ(w4.bytes(), 1024 * 64 / 2 + 8 * 64 * 4);  // codes, 8 groups of scales
}

}  // namespace
}  // namespace anvil::kernels
