// GemmFp8 on every tier, decoded to bf16 and to f32, 1 and 2 threads, f32
// and bf16 C, with and without accumulate, for the recipes' operand layouts (quantized by quant.h):
// DeepSeek-V3 forward (1x128 rows x 128x128 tiles, B either way round), its
// weight gradient (1x128 along the token axis on both sides, E5M2 gradient),
// MXFP8 (E8M0 per 32 on both sides; also with B blocks scaled near the
// bottom of E8M0's range), tensorwise and mixed MX x tensor.
// Against the double oracle (ref/gemm_fp8_ref.h) within a bound derived from
// the summation (|error| <= (k + 2) u sum |terms|, u = 2^-24, plus bf16's
// rounding of C), and bitwise: a few rows computed alone equal the same rows
// of the whole batch (batch invariance), 2 threads equal 1, and B packed once
// (PackedFp8B) equals B packed in the call (with block scaling, the check
// that holds the per-tile order, Driver::RunScaled, to the K-block-outer one
// a packed B keeps).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "anvil/core/cpu_features.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/quant.h"
#include "anvil/kernels/ref/gemm_fp8_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

using testing::Ctx;
using testing::SupportedIsas;

// Every tier, AMX and vdpbf16ps both where the CPU has AMX (FP8 decoded to
// bf16 runs on either), with its context.
struct Tier : testing::GemmTier {
  const KernelCtx& Ctx(int threads) const { return testing::Ctx(isa, threads, amx); }
};

std::vector<Tier> Tiers() {
  std::vector<Tier> tiers;
  for (const testing::GemmTier& t : testing::GemmTiers()) tiers.push_back({t});
  return tiers;
}

// A quantized operand with its storage.
struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::vector<uint8_t> e8m0;
  Fp8Operand op;
};

// x [rows, cols] with per-row magnitudes 2^-6..2^6.
std::vector<float> Data(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-6, 6);
  std::vector<float> x(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float s = std::ldexp(1.0f, e(rng));
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = unit(rng) * s;
  }
  return x;
}

enum class Layout { kRows, kTiles, kTensor };

// Quantizes x [rows, cols] (stored as given; K runs along cols for kRows).
Quantized Quantize(const std::vector<float>& x, int64_t rows, int64_t cols, Layout layout,
                   Fp8Format format, BlockScale rule, int64_t block) {
  const KernelCtx& ctx = Ctx(Isa::kScalar, 1);
  Quantized q;
  q.codes.resize(rows * cols);
  q.op.format = format;
  q.op.block = block;
  if (layout == Layout::kTensor) {
    const float s = TensorScale(Amax(ctx, rows * cols, x.data()), format);
    QuantizeTensor(ctx, rows * cols, x.data(), s, format, q.codes.data());
    q.op.scaling = Fp8Scaling::kTensor;
    q.op.scale = 1.0f / s;
  } else if (layout == Layout::kTiles) {
    q.scales.resize(((rows + block - 1) / block) * ((cols + block - 1) / block));
    QuantizeTiles(ctx, rows, cols, x.data(), format, block, q.codes.data(), q.scales.data());
    q.op.scaling = Fp8Scaling::kTiles;
  } else {
    const int64_t nb = rows * ((cols + block - 1) / block);
    q.scales.resize(nb);
    q.e8m0.resize(nb);
    const BlockQuant bq{format, rule, block};
    const bool mx = rule != BlockScale::kAmax;
    QuantizeRows(ctx, rows, cols, x.data(), bq, q.codes.data(),
                 mx ? QuantScales{.e8m0 = q.e8m0.data()} : QuantScales{.f32 = q.scales.data()});
    q.op.scaling = mx ? Fp8Scaling::kMx : Fp8Scaling::kRowBlocks;
  }
  q.op.data = q.codes.data();
  q.op.scales = q.scales.empty() ? nullptr : q.scales.data();
  q.op.e8m0 = q.e8m0.empty() ? nullptr : q.e8m0.data();
  return q;
}

struct Case {
  std::string name;
  Layout a_layout;
  BlockScale a_rule;
  int64_t a_block;
  Layout b_layout;
  BlockScale b_rule;
  int64_t b_block;
  bool trans_b;
  Fp8Format b_format;
  // B [n, k] with every third block of 32 along K scaled down by 2^-118 (to
  // 2^-124..2^-112, E8M0 codes 0-7): MX blocks whose factors leave the
  // bf16-pair stream's exponent shift (ShiftPair) for the multiply, beside
  // blocks that keep it.
  bool tiny_b_blocks = false;
  // B [n, k] with its second strip of 32 columns (C's columns 32-63) at the
  // lower edge of that shift: K blocks of E8M0 codes 8, 9 and 10 in turn
  // (amax 2^-111, 2^-110, 2^-109; E4M3's range shifts from 10), each with one
  // value on E4M3's least subnormal code and the rest zero, so C's columns
  // there are sums of two terms a block. (Shifted at 9, that code would give
  // bf16 0 where the multiply gives the subnormal 2^-127, which vdpbf16ps
  // reads as 0 too; at 8 it would wrap to -inf.)
  bool edge_b_strip = false;
  // B [n, k]'s first 16 rows (C's columns 0-15, one AVX2 stream strip) with
  // every third MX block at E8M0 codes 247-254 (factors 2^120-2^127) and
  // one value in each, E4M3's least subnormal (so the sums stay finite):
  // factors the AVX2 stream cannot fold with E4M3's 2^8 into one multiply.
  bool wide_b_blocks = false;
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"deepseek fwd (B [k, n] tiles)", Layout::kRows, BlockScale::kAmax, 128, Layout::kTiles,
       BlockScale::kAmax, 128, false, Fp8Format::kE4M3},
      {"deepseek dgrad (B [n, k] tiles)", Layout::kRows, BlockScale::kAmax, 128, Layout::kTiles,
       BlockScale::kAmax, 128, true, Fp8Format::kE4M3},
      {"wgrad 1x128 both, e5m2 B", Layout::kRows, BlockScale::kAmax, 128, Layout::kRows,
       BlockScale::kAmax, 128, true, Fp8Format::kE5M2},
      {"mxfp8", Layout::kRows, BlockScale::kMxOcp, 32, Layout::kRows, BlockScale::kMxRoundUp, 32,
       true, Fp8Format::kE4M3},
      {"tensorwise NN", Layout::kTensor, BlockScale::kAmax, 128, Layout::kTensor, BlockScale::kAmax,
       128, false, Fp8Format::kE4M3},
      {"tensorwise NT e5m2", Layout::kTensor, BlockScale::kAmax, 128, Layout::kTensor,
       BlockScale::kAmax, 128, true, Fp8Format::kE5M2},
      {"mx x tensor", Layout::kRows, BlockScale::kMxOcp, 32, Layout::kTensor, BlockScale::kAmax,
       128, true, Fp8Format::kE4M3},
      {"mxfp8, tiny B blocks", Layout::kRows, BlockScale::kMxOcp, 32, Layout::kRows,
       BlockScale::kMxOcp, 32, true, Fp8Format::kE4M3, true},
      {"mxfp8, B strip at E8M0 codes 8-10", Layout::kRows, BlockScale::kMxOcp, 32,
       Layout::kRows, BlockScale::kMxOcp, 32, true, Fp8Format::kE4M3, false, true},
      {"mxfp8, B blocks at E8M0 codes 247-254", Layout::kRows, BlockScale::kMxOcp, 32,
       Layout::kRows, BlockScale::kMxOcp, 32, true, Fp8Format::kE4M3, false, false, true},
      // Mixed: an E4M3 decode's 2^8 must be restored once (the AVX2 stream
      // puts it in A's values or in B's MX factors, never both).
      {"1x128 A x mxfp8 B", Layout::kRows, BlockScale::kAmax, 128, Layout::kRows,
       BlockScale::kMxOcp, 32, true, Fp8Format::kE4M3},
      {"mxfp8, e5m2 B", Layout::kRows, BlockScale::kMxOcp, 32, Layout::kRows, BlockScale::kMxOcp,
       32, true, Fp8Format::kE5M2},
  };
  return cases;
}

// One case at one shape: every tier against the oracle; invariances bitwise.
void Check(const Case& cs, int64_t m, int64_t n, int64_t k) {
  const std::vector<float> xa = Data(m, k, 1);
  std::vector<float> xb = Data(cs.trans_b ? n : k, cs.trans_b ? k : n, 2);
  if (cs.edge_b_strip) {
    for (int64_t j = 32; j < std::min<int64_t>(n, 64); ++j) {
      for (int64_t p = 0; p < k; ++p) {
        const int64_t block = p / 32, at = p % 32;
        const int e = -111 + static_cast<int>(block % 3);
        xb[j * k + p] = at == 0 ? std::ldexp(1.0f, e) : at == 1 ? std::ldexp(1.0f, e - 17) : 0.0f;
      }
    }
  }
  if (cs.tiny_b_blocks) {
    for (size_t i = 0; i < xb.size(); ++i) {
      if ((static_cast<int64_t>(i) % k) / 32 % 3 == 1) xb[i] = std::ldexp(xb[i], -118);
    }
  }
  const Quantized a = Quantize(xa, m, k, cs.a_layout, Fp8Format::kE4M3, cs.a_rule, cs.a_block);
  Quantized b = Quantize(xb, cs.trans_b ? n : k, cs.trans_b ? k : n, cs.b_layout, cs.b_format,
                         cs.b_rule, cs.b_block);
  if (cs.wide_b_blocks) {
    const int64_t blocks = (k + 31) / 32;
    for (int64_t j = 0; j < std::min<int64_t>(n, 16); ++j) {
      for (int64_t kb = 2; kb < blocks; kb += 3) {
        b.e8m0[j * blocks + kb] = static_cast<uint8_t>(247 + (j + kb) % 8);
        for (int64_t p = kb * 32; p < std::min(k, kb * 32 + 32); ++p) b.codes[j * k + p] = 0;
        b.codes[j * k + kb * 32] = (j + kb) % 2 == 0 ? 0x01 : 0x81;  // +-2^-9
      }
    }
  }
  const std::vector<double> c0d = [&] {
    std::vector<double> c(m * n);
    for (int64_t i = 0; i < m * n; ++i) c[i] = 0.25 * std::sin(static_cast<double>(i));
    return c;
  }();
  std::vector<float> c0(c0d.begin(), c0d.end());
  const int64_t s = GemmFp8KBlock(Isa::kScalar, a.op, b.op);
  Fp8Operand abs_a = a.op, abs_b = b.op;
  for (const bool accumulate : {false, true}) {
    const std::vector<double> want =
        ref::GemmFp8(m, n, k, cs.trans_b, a.op, b.op, s, accumulate ? &c0d : nullptr);
    // |terms| bound: the oracle on absolute codes (sign bit cleared) and |C0|.
    std::vector<uint8_t> abs_codes_a(a.codes), abs_codes_b(b.codes);
    for (auto& q : abs_codes_a) q &= 0x7F;
    for (auto& q : abs_codes_b) q &= 0x7F;
    abs_a.data = abs_codes_a.data();
    abs_b.data = abs_codes_b.data();
    std::vector<double> c0abs(c0d.size());
    for (size_t i = 0; i < c0d.size(); ++i) c0abs[i] = std::fabs(c0d[i]);
    const std::vector<double> mag =
        ref::GemmFp8(m, n, k, cs.trans_b, abs_a, abs_b, s, accumulate ? &c0abs : nullptr);
    for (const Tier& tier : Tiers())
      for (const Fp8Decode decode : {Fp8Decode::kBf16, Fp8Decode::kF32}) {
        const GemmArgs args{.m = m,
                            .n = n,
                            .k = k,
                            .trans_b = cs.trans_b ? Trans::kT : Trans::kN,
                            .accumulate = accumulate};
        std::vector<float> c1 = c0, c2 = c0;
        GemmFp8(tier.Ctx(1), args, a.op, b.op, c1.data(), decode);
        GemmFp8(tier.Ctx(2), args, a.op, b.op, c2.data(), decode);
        const std::string where = cs.name + " " + std::to_string(m) + "x" + std::to_string(n) +
                                  "x" + std::to_string(k) + (accumulate ? " acc " : " ") +
                                  tier.Name() + (decode == Fp8Decode::kBf16 ? " bf16" : " f32");
        EXPECT_EQ(c1, c2) << where << ": 2 threads differ from 1";
        {  // B packed once, from a copy poisoned afterwards: the same bits.
          Quantized copy = b;
          copy.op.data = copy.codes.data();
          if (!copy.scales.empty()) copy.op.scales = copy.scales.data();
          if (!copy.e8m0.empty()) copy.op.e8m0 = copy.e8m0.data();
          const PackedFp8B packed(tier.Ctx(1), args, a.op, copy.op, decode,
                                  PackedFp8B::Streaming::kAlways);
          // Decode rows stream B's codes where the tier can (so the check
          // above covers that path), the panels elsewhere.
          const CpuFeatures& cpu = GetCpuFeatures();
          const Isa runs_on =
              tier.isa == Isa::kAvx512 && decode == Fp8Decode::kBf16 && !cpu.avx512_bf16
                  ? Isa::kAvx2
                  : tier.isa;
          // AMX (bf16 decode, K blocks of whole tiles) has no streaming path.
          const bool amx = tier.amx && decode == Fp8Decode::kBf16 &&
                           GemmFp8KBlock(tier.isa, a.op, b.op, decode) % 32 == 0;
          const bool streams = !amx && m <= 8 &&
                               (runs_on == Isa::kAvx2 ||
                                (runs_on == Isa::kAvx512 && cpu.avx512_vbmi));
          EXPECT_EQ(packed.Streams(m), streams) << where;
          std::fill(copy.codes.begin(), copy.codes.end(), uint8_t{0x7F});  // E4M3 NaN
          std::fill(copy.scales.begin(), copy.scales.end(), NAN);
          std::fill(copy.e8m0.begin(), copy.e8m0.end(), uint8_t{0xFF});
          std::vector<float> c4 = c0;
          GemmFp8(tier.Ctx(2), args, a.op, packed, c4.data());
          EXPECT_EQ(c4, c1) << where << ": B packed once differs";
        }
        for (int64_t i = 0; i < m * n; ++i) {
          const double bound = (static_cast<double>(k) + 4) * 0x1p-24 * mag[i] + 1e-30;
          ASSERT_LE(std::fabs(c1[i] - want[i]), bound) << where << " element " << i;
        }
        // Rows [1, 4) alone: the same bits as in the batch.
        if (m >= 4) {
          Fp8Operand sub = a.op;
          const int64_t r0 = 1, rows = 3;
          sub.data = a.codes.data() + r0 * k;
          const int64_t nb = (k + a.op.block - 1) / a.op.block;
          if (sub.scaling == Fp8Scaling::kRowBlocks) sub.scales = a.scales.data() + r0 * nb;
          if (sub.scaling == Fp8Scaling::kMx) sub.e8m0 = a.e8m0.data() + r0 * nb;
          std::vector<float> part(c0.begin() + r0 * n, c0.begin() + (r0 + rows) * n);
          GemmArgs sub_args = args;
          sub_args.m = rows;
          GemmFp8(tier.Ctx(2), sub_args, sub, b.op, part.data(), decode);
          EXPECT_TRUE(std::equal(part.begin(), part.end(), c1.begin() + r0 * n))
              << where << ": rows alone differ from the batch";
        }
        // bf16 C: the f32 result rounded once.
        std::vector<BF16> cb(m * n);
        for (int64_t i = 0; i < m * n; ++i) cb[i] = ToBF16(c0[i]);
        std::vector<float> c_from_bf16(m * n);
        for (int64_t i = 0; i < m * n; ++i) c_from_bf16[i] = ToFloat(cb[i]);
        std::vector<float> c3 = c_from_bf16;
        GemmFp8(tier.Ctx(2), args, a.op, b.op, cb.data(), decode);
        GemmFp8(tier.Ctx(2), args, a.op, b.op, c3.data(), decode);
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_EQ(cb[i].bits, ToBF16(c3[i]).bits) << where << " bf16 C element " << i;
        }
      }
  }
}

TEST(GemmFp8, RecipesAgainstOracleAndInvariant) {
  for (const Case& cs : Cases()) {
    Check(cs, 30, 70, 300);   // ragged: partial tiles, blocks and panels
    Check(cs, 1, 70, 300);    // a decode row
    Check(cs, 5, 33, 128);    // one K block
    Check(cs, 64, 256, 640);  // several full tiles and blocks
    // Block scaling's per-tile order (RunScaled): two row blocks, 2 threads
    // split by rows (the second region starting mid-matrix); odd K past 8 rows.
    Check(cs, 200, 40, 300);
    Check(cs, 30, 70, 301);
    // 200 columns over all of K = 1024: B with the A block outgrows the test
    // contexts' 1 MiB of scratch (f32 decode), so RunScaled takes the
    // columns in blocks.
    Check(cs, 16, 200, 1024);
    // Decode rows from B packed once (AVX-512 with VBMI streams it): odd K
    // (a half k-pair at its end), several strips a thread, up to 8 rows.
    Check(cs, 2, 300, 301);
    Check(cs, 8, 130, 257);
    Check(cs, 8, 1100, 160);  // over 2^18 multiply-adds: 2 threads split the strips
    // Every row count of the AVX2 stream's tiles (1 row over 4 + 2 + 1
    // strips; 3-4 rows a strip at a time; 6-7 rows by half strips).
    Check(cs, 1, 100, 160);
    Check(cs, 3, 40, 160);
    Check(cs, 4, 40, 160);
    Check(cs, 6, 40, 160);
    Check(cs, 7, 40, 160);
  }
}

// On a CPU with AMX, FP8 decoded to bf16 runs on AMX tiles in a context
// that uses them (its bits part from vdpbf16ps's over a long K, packed B or
// not), except with K blocks that are not whole tiles (a multiple of 32):
// those stay on vdpbf16ps, the same bits in either context.
TEST(GemmFp8, AmxContextsRunBf16DecodeOnTiles) {
  if (!IsaSupported(Isa::kAvx512) || !AmxEnabled()) GTEST_SKIP() << "no AMX-BF16 here";
  const Tier amx{Isa::kAvx512, true}, dot{Isa::kAvx512, false};
  const int64_t m = 40, n = 64, k = 1024;
  for (const int64_t block : {int64_t{128}, int64_t{48}}) {
    const std::vector<float> xa = Data(m, k, 11), xb = Data(n, k, 12);
    const Quantized a =
        Quantize(xa, m, k, Layout::kRows, Fp8Format::kE4M3, BlockScale::kAmax, block);
    const Quantized b =
        Quantize(xb, n, k, Layout::kRows, Fp8Format::kE4M3, BlockScale::kAmax, block);
    const GemmArgs args{.m = m, .n = n, .k = k, .trans_b = Trans::kT};
    std::vector<float> c_amx(m * n), c_dot(m * n), p_amx(m * n), p_dot(m * n);
    GemmFp8(amx.Ctx(2), args, a.op, b.op, c_amx.data(), Fp8Decode::kBf16);
    GemmFp8(dot.Ctx(2), args, a.op, b.op, c_dot.data(), Fp8Decode::kBf16);
    const PackedFp8B on(amx.Ctx(1), args, a.op, b.op, Fp8Decode::kBf16);
    const PackedFp8B off(dot.Ctx(1), args, a.op, b.op, Fp8Decode::kBf16);
    GemmFp8(amx.Ctx(2), args, a.op, on, p_amx.data());
    GemmFp8(dot.Ctx(2), args, a.op, off, p_dot.data());
    const bool tiles = block % 32 == 0;
    EXPECT_EQ(std::memcmp(c_amx.data(), c_dot.data(), c_amx.size() * 4) != 0, tiles) << block;
    EXPECT_EQ(std::memcmp(p_amx.data(), p_dot.data(), p_amx.size() * 4) != 0, tiles) << block;
    EXPECT_EQ(std::memcmp(p_amx.data(), c_amx.data(), p_amx.size() * 4), 0) << block;
    if (tiles) {
      EXPECT_DEATH(GemmFp8(dot.Ctx(1), args, a.op, on, p_dot.data()), "packed with AMX on");
    }
  }
}

// A B with a NaN code (a weight gone bad) is left to the decoded panels
// (the streaming decode's words cannot hold NaN's f32 bits): packed once,
// still GemmFp8's bits, NaN's included.
TEST(GemmFp8, PackedBWithNanCode) {
  const int64_t m = 2, n = 40, k = 130;
  const std::vector<float> xa = Data(m, k, 5), xb = Data(n, k, 6);
  const Quantized a = Quantize(xa, m, k, Layout::kTensor, Fp8Format::kE4M3, BlockScale::kAmax, 128);
  Quantized b = Quantize(xb, n, k, Layout::kTensor, Fp8Format::kE4M3, BlockScale::kAmax, 128);
  b.codes[7 * k + 3] = 0xFF;  // E4M3 NaN: column 7 of C is NaN
  const GemmArgs args{.m = m, .n = n, .k = k, .trans_b = Trans::kT};
  for (const Tier& tier : Tiers())
    for (const Fp8Decode decode : {Fp8Decode::kBf16, Fp8Decode::kF32}) {
      std::vector<float> want(m * n), got(m * n);
      GemmFp8(tier.Ctx(1), args, a.op, b.op, want.data(), decode);
      const PackedFp8B packed(tier.Ctx(1), args, a.op, b.op, decode,
                              PackedFp8B::Streaming::kAlways);
      EXPECT_FALSE(packed.Streams(m));
      GemmFp8(tier.Ctx(1), args, a.op, packed, got.data());
      EXPECT_TRUE(std::isnan(got[7]));
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
          << tier.Name() << (decode == Fp8Decode::kBf16 ? " bf16" : " f32");
    }
}

// By default a B streams only where its decoded panels outgrow the L2
// caches (4 MiB), from 5 rows only beyond 16 MiB, and never when asked not to.
TEST(GemmFp8, PackedBStreamsWhenLarge) {
  const int64_t k = 1024;
  for (const Isa isa : SupportedIsas()) {
    if (isa == Isa::kScalar || (isa == Isa::kAvx512 && !GetCpuFeatures().avx512_vbmi)) continue;
    // f32 panels: 1 MiB, 5 MiB, 20 MiB
    for (const int64_t n : {int64_t{256}, int64_t{1280}, int64_t{5120}}) {
      const std::vector<float> xb = Data(n, k, 7);
      const Quantized b =
          Quantize(xb, n, k, Layout::kTensor, Fp8Format::kE4M3, BlockScale::kAmax, 128);
      Fp8Operand a_like{.scaling = Fp8Scaling::kTensor};
      const GemmArgs args{.n = n, .k = k, .trans_b = Trans::kT};
      const KernelCtx& ctx = Ctx(isa, 1);
      const PackedFp8B packed(ctx, args, a_like, b.op, Fp8Decode::kF32);
      EXPECT_EQ(packed.Streams(1), n > 1024) << IsaName(isa) << " " << n;
      EXPECT_EQ(packed.Streams(4), n > 1024) << IsaName(isa) << " " << n;
      EXPECT_EQ(packed.Streams(5), n > 4096) << IsaName(isa) << " " << n;
      EXPECT_FALSE(PackedFp8B(ctx, args, a_like, b.op, Fp8Decode::kF32,
                              PackedFp8B::Streaming::kNever)
                       .Streams(1));
    }
  }
}

TEST(GemmFp8, KBlockFollowsTheScales) {
  Fp8Operand block{.scaling = Fp8Scaling::kRowBlocks, .block = 128};
  Fp8Operand tensor{.scaling = Fp8Scaling::kTensor};
  Fp8Operand mx{.scaling = Fp8Scaling::kMx, .block = 32};
  EXPECT_EQ(GemmFp8KBlock(Isa::kScalar, block, tensor), 128);
  EXPECT_EQ(GemmFp8KBlock(Isa::kScalar, tensor, block), 128);
  EXPECT_EQ(GemmFp8KBlock(Isa::kScalar, mx, mx), GemmKBlock(Isa::kScalar, true));
  EXPECT_EQ(GemmFp8KBlock(Isa::kScalar, tensor, tensor), GemmKBlock(Isa::kScalar, true));
  for (const Isa isa : SupportedIsas()) {
    EXPECT_EQ(GemmFp8KBlock(isa, mx, mx, Fp8Decode::kF32), GemmKBlock(isa, false));
    EXPECT_EQ(GemmFp8KBlock(isa, block, mx, Fp8Decode::kF32), 128);
  }
}

}  // namespace
}  // namespace anvil::kernels
