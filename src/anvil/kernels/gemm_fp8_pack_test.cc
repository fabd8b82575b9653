// GemmFp8's AVX-512 packers (cpu/gemm_avx512_pack.cc's gathers and, where
// the CPU has AVX512_VBMI, cpu/gemm_avx512_fp8_pack.cc's byte permutes) write
// the words gemm_fp8.h's scalar Fp8Pack::Pack writes, bit for bit: every
// code of both formats (NaN and Inf included), rows stored [rows, k] and
// [k, rows], f32 words and bf16 pairs, with and without MX factors (0x00,
// 0xFF and both edges of the range the permutes scale by an exponent add
// among them; [rows, k] only, as GemmFp8 allows), both panel heights, odd K,
// partial chunks and a partial last panel. A made-up table whose code 0 is
// not zero shows that the words past K and past the rows are written as
// zeros, not decoded. Skipped on CPUs without AVX-512.
#include <gtest/gtest.h>

#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "anvil/core/convert.h"
#include "anvil/core/cpu_features.h"
#include "anvil/kernels/cpu/gemm_avx512.h"
#include "anvil/kernels/cpu/gemm_fp8.h"

namespace anvil::kernels::gemm_internal {
namespace {

// A tier without a vector packer: Fp8Pack::Pack runs its scalar code.
struct ScalarPackTier {
  static bool PackFp8Vector(const Fp8Operand&, const float*, const uint16_t*, int64_t, bool,
                            int64_t, int64_t, int64_t, int64_t, int64_t, int, bool, uint32_t*) {
    return false;
  }
};

enum class Packer { kChosen, kGathers, kVbmi };

// made_up: a bf16 table of words 0x4000 | q (non-MX pairs read nothing else).
template <int64_t kPanel, bool kPairs>
void Check(Fp8Format format, bool mx, bool trans, int64_t rows, int64_t p0, int64_t kc,
           int64_t k_total, uint32_t seed, Packer packer = Packer::kChosen,
           bool made_up = false) {
  float values[256];
  uint16_t bf16[256];
  for (int q = 0; q < 256; ++q) {
    const auto code = static_cast<uint8_t>(q);
    values[q] = format == Fp8Format::kE4M3 ? E4M3ToF32(code) : E5M2ToF32(code);
    bf16[q] = made_up ? static_cast<uint16_t>(0x4000 | q) : F32ToBF16(values[q]);
  }
  // Stored [rows, k] (ld along k) or [k, rows] (ld along the rows).
  const int64_t r0 = 3, all_rows = r0 + rows, ld = (trans ? all_rows : k_total) + 5;
  std::mt19937 rng(seed);
  std::vector<uint8_t> codes((trans ? k_total : all_rows) * ld);
  for (size_t i = 0; i < codes.size(); ++i)
    codes[i] = static_cast<uint8_t>(i % 256 == 0 ? rng() : i);
  const int64_t blocks = (k_total + 31) / 32;
  std::vector<uint8_t> e8m0(all_rows * blocks);
  for (size_t i = 0; i < e8m0.size(); ++i) {
    // The exponent add's range: 10-246 for E4M3, 17-239 for E5M2; one past each edge too.
    static constexpr uint8_t kEdges[] = {9, 10, 16, 17, 18, 238, 239, 240, 246, 247};
    e8m0[i] = i % 13 == 0  ? 0xFF
              : i % 11 == 0 ? 0x00
              : i % 3 == 0  ? kEdges[rng() % std::size(kEdges)]
                            : static_cast<uint8_t>(110 + rng() % 35);
  }
  Fp8Operand o;
  o.data = codes.data();
  o.format = format;
  o.scaling = mx ? Fp8Scaling::kMx : Fp8Scaling::kTensor;
  o.e8m0 = mx ? e8m0.data() : nullptr;
  o.block = mx ? 32 : 128;
  const int64_t steps = kPairs ? (kc + 1) / 2 : kc;
  const int64_t words = (rows + kPanel - 1) / kPanel * kPanel * steps;
  std::vector<uint32_t> want(words, 0xDEADBEEF), got(words, 0xDEADBEEF);
  Fp8Pack<ScalarPackTier>::Pack<kPanel, kPairs>(o, values, bf16, ld, trans, r0, rows, p0, kc,
                                                k_total, want.data());
  const int panel = static_cast<int>(kPanel);
  switch (packer) {
    case Packer::kChosen:
      ASSERT_TRUE(avx512::PackFp8Vector(o, values, bf16, ld, trans, r0, rows, p0, kc, k_total,
                                        panel, kPairs, got.data()));
      break;
    case Packer::kGathers:
      ASSERT_TRUE(avx512::PackFp8Gathers(o, values, bf16, ld, trans, r0, rows, p0, kc, k_total,
                                         panel, kPairs, got.data()));
      break;
    case Packer::kVbmi:
      ASSERT_TRUE(avx512::PackFp8PairsVbmi(o, bf16, ld, trans, r0, rows, p0, kc, k_total, panel,
                                           got.data()));
      break;
  }
  for (int64_t i = 0; i < words; ++i) {
    ASSERT_EQ(got[i], want[i]) << (format == Fp8Format::kE4M3 ? "e4m3" : "e5m2")
                               << (mx ? " mx" : "") << (trans ? " [k, rows]" : "")
                               << (kPairs ? " pairs" : " f32") << (made_up ? " made-up" : "")
                               << " packer " << static_cast<int>(packer) << " panel " << kPanel
                               << " rows "
                               << rows << " kc " << kc << ": word " << i;
  }
}

TEST(GemmFp8Pack, VectorPackerEqualsScalar) {
  if (!IsaSupported(Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<Packer> packers = {Packer::kChosen, Packer::kGathers};
  if (GetCpuFeatures().avx512_vbmi) packers.push_back(Packer::kVbmi);
  for (const Packer packer : packers) {
    for (Fp8Format format : {Fp8Format::kE4M3, Fp8Format::kE5M2}) {
      for (int variant = 0; variant < 3; ++variant) {
        const bool mx = variant == 1, trans = variant == 2;
        // (rows, p0, kc, k_total): whole chunks, an odd K tail, a second K block.
        if (packer != Packer::kVbmi) {  // f32 words: no VBMI decoder
          Check<32, false>(format, mx, trans, 45, 0, 96, 96, 1, packer);
          Check<32, false>(format, mx, trans, 7, 0, 37, 37, 2, packer);
          Check<14, false>(format, mx, trans, 30, 64, 75, 139, 3, packer);
        }
        Check<32, true>(format, mx, trans, 45, 0, 96, 96, 4, packer);
        Check<32, true>(format, mx, trans, 33, 0, 37, 37, 5, packer);
        Check<14, true>(format, mx, trans, 30, 64, 75, 139, 6, packer);
        Check<14, true>(format, mx, trans, 1, 0, 1, 1, 7, packer);
        Check<32, true>(format, mx, trans, 40, 32, 200, 300, 8, packer);
        if (!mx) {
          Check<32, true>(format, mx, trans, 33, 0, 37, 37, 9, packer, /*made_up=*/true);
          Check<14, true>(format, mx, trans, 30, 64, 75, 139, 10, packer, /*made_up=*/true);
        }
      }
    }
  }
}

}  // namespace
}  // namespace anvil::kernels::gemm_internal
