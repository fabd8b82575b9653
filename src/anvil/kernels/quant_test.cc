// FP8 quantization (quant.h) on every tier and 1 and 2 threads: bitwise
// against the scalar oracle (ref/quant_ref.h) for tensorwise, row-blocked,
// column-blocked (transposed) and tiled quantization with each scale rule and
// format, over data spanning 2^-40..2^30 with all-zero, infinite and NaN
// blocks. The oracle itself is held to the formats' definitions: the MX
// scale rules' exponents (OCP: amax / s in [2^emax, 2^(emax+1)); round-up:
// nothing saturates), the amax rule's largest element landing on fp8_max,
// and the dequantization error within half an fp8 ulp.
#include "anvil/kernels/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "anvil/kernels/ref/quant_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

using testing::Ctx;
using testing::SupportedIsas;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// rows x cols values whose magnitude varies by block: each row gets a scale
// 2^k with k in [-40, 30]; some blocks are all zero, one holds +inf and one
// NaN (when `specials`).
std::vector<float> WideData(int64_t rows, int64_t cols, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-40, 30);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, exponent(rng));
    const bool zero_row = r % 7 == 3;
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = zero_row ? 0.0f : unit(rng) * scale;
  }
  if (specials && rows * cols > 40) {
    x[static_cast<size_t>(rows * cols / 3)] = kInf;
    x[static_cast<size_t>(rows * cols / 2) + 1] = -kInf;
    x[static_cast<size_t>(rows * cols - 5)] = kNaN;
  }
  return x;
}

const std::vector<BlockQuant>& Quants() {
  static const std::vector<BlockQuant> q = {
      {Fp8Format::kE4M3, BlockScale::kAmax, 128},     {Fp8Format::kE5M2, BlockScale::kAmax, 128},
      {Fp8Format::kE4M3, BlockScale::kMxOcp, 32},     {Fp8Format::kE5M2, BlockScale::kMxOcp, 32},
      {Fp8Format::kE4M3, BlockScale::kMxRoundUp, 32}, {Fp8Format::kE4M3, BlockScale::kAmax, 7},
  };
  return q;
}

std::string Name(const BlockQuant& b) {
  const char* rule = b.scale == BlockScale::kAmax    ? "amax"
                     : b.scale == BlockScale::kMxOcp ? "mx-ocp"
                                                     : "mx-up";
  return std::string(b.format == Fp8Format::kE4M3 ? "e4m3 " : "e5m2 ") + rule + " block " +
         std::to_string(b.block);
}

// Scales as comparable bits: f32 (NaN compares by bits) or e8m0 bytes.
struct Scales {
  std::vector<float> f32;
  std::vector<uint8_t> e8m0;
  QuantScales out(const BlockQuant& b) {
    return b.scale == BlockScale::kAmax ? QuantScales{.f32 = f32.data()}
                                        : QuantScales{.e8m0 = e8m0.data()};
  }
  bool operator==(const Scales& o) const {
    if (e8m0 != o.e8m0 || f32.size() != o.f32.size()) return false;
    for (size_t i = 0; i < f32.size(); ++i) {
      if (std::bit_cast<uint32_t>(f32[i]) != std::bit_cast<uint32_t>(o.f32[i])) return false;
    }
    return true;
  }
};

TEST(Quant, AmaxMatchesOracleAndReportsNonFinite) {
  for (const Isa isa : SupportedIsas()) {
    for (const int threads : {1, 2}) {
      const KernelCtx& ctx = Ctx(isa, threads);
      for (const int64_t n : {0, 1, 15, 16, 17, 1000, 70001}) {
        std::vector<float> x = testing::RandomF32(n, static_cast<uint32_t>(n), -3.0f, 3.0f);
        EXPECT_EQ(Amax(ctx, n, x.data()), ref::Amax(x.data(), n)) << n;
        if (n == 0) continue;
        x[n / 2] = -kInf;
        EXPECT_TRUE(std::isnan(Amax(ctx, n, x.data()))) << "inf at " << n / 2;
        x[n / 2] = 1.0f;
        x[n - 1] = kNaN;
        EXPECT_TRUE(std::isnan(Amax(ctx, n, x.data()))) << "NaN last of " << n;
      }
      const std::vector<float> zeros = {-0.0f, 0.0f, -0.0f};
      EXPECT_EQ(Amax(ctx, 3, zeros.data()), 0.0f);
    }
  }
}

TEST(Quant, TensorwiseMatchesOracle) {
  const std::vector<float> x = WideData(1, 50001, 4, false);
  for (const Isa isa : SupportedIsas()) {
    const KernelCtx& ctx = Ctx(isa, 2);
    for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
      for (const float scale : {TensorScale(ref::Amax(x.data(), 50001), f, 0), 3.0e-7f, 1.0e9f}) {
        std::vector<uint8_t> q(x.size()), want(x.size());
        QuantizeTensor(ctx, 50001, x.data(), scale, f, q.data());
        ref::QuantizeTensor(50001, x.data(), scale, f, want.data());
        EXPECT_EQ(q, want) << "scale " << scale;
      }
      for (const auto& [rows, cols] :
           std::vector<std::pair<int64_t, int64_t>>{{300, 70}, {1, 5}, {129, 130}}) {
        const std::vector<float> m = WideData(rows, cols, 3, false);
        const float scale = TensorScale(ref::Amax(m.data(), rows * cols), f, 0);
        std::vector<uint8_t> q_t(rows * cols), want_t(rows * cols);
        QuantizeTensorTransposed(ctx, rows, cols, m.data(), scale, f, q_t.data());
        ref::QuantizeTensorTransposed(rows, cols, m.data(), scale, f, want_t.data());
        EXPECT_EQ(q_t, want_t) << "transposed " << rows << " x " << cols << " " << IsaName(isa);
      }
      EXPECT_EQ(TensorScale(0.0f, f), 1.0f);
      EXPECT_EQ(TensorScale(kNaN, f), 1.0f);
      EXPECT_EQ(TensorScale(2.0f, f, 1), ref::TensorScale(2.0f, f, 1));
      EXPECT_EQ(TensorScale(Fp8Max(f), f), 1.0f);
    }
  }
}

// The cast at every code of both formats, the midpoints between neighbours
// (ties), one f32 ulp either side of each, signed zeros, f32 subnormals,
// the saturation edges and non-finite values: bitwise core's conversion.
TEST(Quant, CastMatchesCoreAtEveryCodeAndTie) {
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    std::vector<float> x = {0.0f,
                            -0.0f,
                            1e-45f,
                            -1e-45f,
                            1e-39f,
                            1e-30f,
                            kInf,
                            -kInf,
                            kNaN,
                            -kNaN,
                            Fp8Max(f),
                            -Fp8Max(f),
                            std::nextafter(Fp8Max(f), kInf),
                            1e30f,
                            -1e30f};
    std::vector<float> values;
    for (int code = 0; code < 256; ++code) {
      const float v = ref::DecodeFp8(static_cast<uint8_t>(code), f);
      if (std::isfinite(v)) values.push_back(v);
    }
    std::sort(values.begin(), values.end());
    for (size_t i = 0; i < values.size(); ++i) {
      x.push_back(values[i]);
      if (i + 1 == values.size()) continue;
      const float mid = (values[i] + values[i + 1]) / 2;  // exact: a few significant bits
      x.insert(x.end(), {mid, std::nextafter(mid, -kInf), std::nextafter(mid, kInf)});
    }
    for (const Isa isa : SupportedIsas()) {
      std::vector<uint8_t> q(x.size()), want(x.size());
      QuantizeTensor(Ctx(isa, 1), static_cast<int64_t>(x.size()), x.data(), 1.0f, f, q.data());
      for (size_t i = 0; i < x.size(); ++i) {
        want[i] = ref::CastFp8(x[i], f);
        EXPECT_EQ(q[i], want[i]) << IsaName(isa) << " " << (f == Fp8Format::kE4M3 ? "e4m3" : "e5m2")
                                 << " of " << x[i];
      }
    }
  }
}

TEST(Quant, RowBlocksMatchOracle) {
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{5, 300}, {3, 32}, {1, 1}, {0, 7}, {9, 1000}}) {
    const std::vector<float> x = WideData(rows, cols, 7, true);
    for (const BlockQuant& b : Quants()) {
      const int64_t nb = rows * ((cols + b.block - 1) / b.block);
      Scales want{std::vector<float>(nb), std::vector<uint8_t>(nb)};
      std::vector<uint8_t> want_q(rows * cols);
      ref::QuantizeRows(rows, cols, x.data(), b, want_q.data(), want.out(b));
      for (const Isa isa : SupportedIsas()) {
        for (const int threads : {1, 2}) {
          Scales got{std::vector<float>(nb), std::vector<uint8_t>(nb)};
          std::vector<uint8_t> q(rows * cols);
          QuantizeRows(Ctx(isa, threads), rows, cols, x.data(), b, q.data(), got.out(b));
          EXPECT_EQ(q, want_q) << Name(b) << ", " << rows << " x " << cols << ", " << IsaName(isa);
          EXPECT_TRUE(got == want) << Name(b) << " scales, " << IsaName(isa);
        }
      }
    }
  }
}

TEST(Quant, TransposedColumnBlocksMatchOracle) {
  for (const auto& [rows, cols] :
       std::vector<std::pair<int64_t, int64_t>>{{300, 70}, {32, 3}, {1, 1}, {129, 130}}) {
    const std::vector<float> x = WideData(rows, cols, 9, true);
    for (const BlockQuant& b : Quants()) {
      const int64_t nb = cols * ((rows + b.block - 1) / b.block);
      Scales want{std::vector<float>(nb), std::vector<uint8_t>(nb)};
      std::vector<uint8_t> want_q(rows * cols);
      ref::QuantizeColumnsTransposed(rows, cols, x.data(), b, want_q.data(), want.out(b));
      for (const Isa isa : SupportedIsas()) {
        for (const int threads : {1, 2}) {
          Scales got{std::vector<float>(nb), std::vector<uint8_t>(nb)};
          std::vector<uint8_t> q(rows * cols);
          QuantizeColumnsTransposed(Ctx(isa, threads), rows, cols, x.data(), b, q.data(),
                                    got.out(b));
          EXPECT_EQ(q, want_q) << Name(b) << ", " << rows << " x " << cols << ", " << IsaName(isa);
          EXPECT_TRUE(got == want) << Name(b) << " scales, " << IsaName(isa);
        }
      }
    }
  }
}

TEST(Quant, TilesMatchOracle) {
  const int64_t rows = 260, cols = 300, tile = 128;
  const std::vector<float> x = WideData(rows, cols, 11, true);
  const int64_t tiles = 3 * 3;
  for (const Fp8Format f : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
    std::vector<float> want_s(tiles);
    std::vector<uint8_t> want_q(rows * cols);
    ref::QuantizeTiles(rows, cols, x.data(), f, tile, want_q.data(), want_s.data());
    for (const Isa isa : SupportedIsas()) {
      for (const int threads : {1, 2}) {
        std::vector<float> s(tiles);
        std::vector<uint8_t> q(rows * cols);
        QuantizeTiles(Ctx(isa, threads), rows, cols, x.data(), f, tile, q.data(), s.data());
        EXPECT_EQ(q, want_q) << IsaName(isa);
        Scales a{s, {}}, b{want_s, {}};
        EXPECT_TRUE(a == b) << IsaName(isa);
      }
    }
  }
}

// The oracle against the formats' definitions, block by block.
TEST(Quant, OracleFollowsTheScaleRules) {
  const int64_t rows = 64, cols = 256;
  const std::vector<float> x = WideData(rows, cols, 13, false);
  for (const BlockQuant& b : Quants()) {
    const int64_t nb = (cols + b.block - 1) / b.block;
    Scales s{std::vector<float>(rows * nb), std::vector<uint8_t>(rows * nb)};
    std::vector<uint8_t> q(rows * cols);
    ref::QuantizeRows(rows, cols, x.data(), b, q.data(), s.out(b));
    const float fmax = Fp8Max(b.format);
    const int emax = Fp8MaxExponent(b.format);
    // Half an ulp of the format, relative (3 or 2 mantissa bits), and the
    // smallest subnormal's half (absolute, in units of the scale).
    const double rel = b.format == Fp8Format::kE4M3 ? 0x1p-4 : 0x1p-3;
    const double sub = b.format == Fp8Format::kE4M3 ? 0x1p-10 : 0x1p-17;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < nb; ++j) {
        const int64_t c0 = j * b.block, len = std::min(b.block, cols - c0);
        const float amax = ref::Amax(x.data() + r * cols + c0, len);
        const float scale = b.scale == BlockScale::kAmax
                                ? s.f32[r * nb + j]
                                : std::ldexp(1.0f, s.e8m0[r * nb + j] - 127);
        if (amax == 0.0f) continue;
        if (b.scale == BlockScale::kMxOcp) {
          EXPECT_GE(amax / scale, std::ldexp(1.0f, emax)) << Name(b);
          EXPECT_LT(amax / scale, std::ldexp(1.0f, emax + 1)) << Name(b);
        }
        if (b.scale == BlockScale::kMxRoundUp) {
          EXPECT_LE(amax / scale, fmax) << Name(b);
        }
        for (int64_t c = c0; c < c0 + len; ++c) {
          const double xv = x[r * cols + c];
          const double deq = static_cast<double>(ref::DecodeFp8(q[r * cols + c], b.format)) * scale;
          if (b.scale == BlockScale::kAmax && std::fabs(xv) == amax) {
            EXPECT_EQ(std::fabs(deq), static_cast<double>(fmax) * scale) << Name(b);
          }
          if (std::fabs(xv) / scale > fmax) continue;  // OCP saturates above fp8_max
          EXPECT_LE(std::fabs(deq - xv), std::max(rel * std::fabs(xv), sub * scale) * (1 + 1e-5))
              << Name(b) << " x " << xv << " deq " << deq;
        }
      }
    }
  }
  // Spec examples: E4M3 amax 448 is s = 1 under both MX rules; 449 saturates
  // under OCP (s = 1) and is s = 2 when rounding up.
  for (const float amax : {448.0f, 449.0f}) {
    const ref::Scale ocp = ref::BlockScaleOf(amax, Fp8Format::kE4M3, BlockScale::kMxOcp);
    const ref::Scale up = ref::BlockScaleOf(amax, Fp8Format::kE4M3, BlockScale::kMxRoundUp);
    EXPECT_EQ(ocp.e8m0, 127) << amax;
    EXPECT_EQ(up.e8m0, amax == 448.0f ? 127 : 128) << amax;
  }
  EXPECT_EQ(ref::BlockScaleOf(0.0f, Fp8Format::kE4M3, BlockScale::kMxOcp).e8m0, 0);
  EXPECT_EQ(ref::BlockScaleOf(kNaN, Fp8Format::kE4M3, BlockScale::kMxOcp).e8m0, 0xFF);
}

}  // namespace
}  // namespace anvil::kernels
