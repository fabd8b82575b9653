// anvil's conversions against NVIDIA's host code in cuda_{bf16,fp16,fp8}.h, bit
// for bit with NaNs: every 8/16-bit code decoded; all boundary f32 and 10^7
// random f32 encoded in every overflow/e8m0 mode, scalar and every bulk path.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/convert.h"
#include "anvil/core/convert_testing.h"

namespace anvil {
namespace {

using testing::Bits;
using testing::Hex;

// 10^7 random inputs take ~2 s in release and ~5 s under ASan/UBSan
// (debug-asan preset), so the sanitized build runs the full count too.
constexpr size_t kRandomCount = 10'000'000;

// ---- the oracle: thin wrappers over the CUDA host functions ----

uint16_t CudaF32ToBF16(float x) { return static_cast<__nv_bfloat16_raw>(__float2bfloat16(x)).x; }
float CudaBF16ToF32(uint16_t b) {
  __nv_bfloat16_raw raw;
  raw.x = b;
  return __bfloat162float(__nv_bfloat16(raw));
}
uint16_t CudaF32ToF16(float x) { return static_cast<__half_raw>(__float2half(x)).x; }
float CudaF16ToF32(uint16_t b) {
  __half_raw raw;
  raw.x = b;
  return __half2float(__half(raw));
}
__nv_saturation_t CudaSat(Overflow o) {
  return o == Overflow::kSaturate ? __NV_SATFINITE : __NV_NOSAT;
}
uint8_t CudaF32ToE4M3(float x, Overflow o) {
  return __nv_cvt_float_to_fp8(x, CudaSat(o), __NV_E4M3);
}
uint8_t CudaF32ToE5M2(float x, Overflow o) {
  return __nv_cvt_float_to_fp8(x, CudaSat(o), __NV_E5M2);
}
// CUDA decodes fp8 to f16 (exact: both fp8 formats fit in f16), then to f32.
float CudaE4M3ToF32(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E4M3)));
}
float CudaE5M2ToF32(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(b, __NV_E5M2)));
}
uint8_t CudaF32ToE8M0(float x, E8M0Rounding r, Overflow o) {
  return __nv_cvt_float_to_e8m0(x, CudaSat(o),
                                r == E8M0Rounding::kTowardZero ? cudaRoundZero : cudaRoundPosInf);
}
// CUDA decodes e8m0 to bf16 (exact, 2^-127 as a bf16 subnormal), then to f32.
float CudaE8M0ToF32(uint8_t b) {
  return __bfloat162float(__nv_bfloat16(__nv_cvt_e8m0_to_bf16raw(b)));
}

// ---- decode: every encoding ----

template <typename Ours, typename Cuda>
void ExpectSameDecodes(const char* name, uint32_t codes, Ours ours, Cuda cuda) {
  int mismatches = 0;
  for (uint32_t c = 0; c < codes; ++c) {
    const uint32_t got = Bits(ours(c)), want = Bits(cuda(c));
    if (got != want && ++mismatches <= 10) {
      ADD_FAILURE() << name << " code " << Hex(c, 4) << ": anvil " << Hex(got) << ", CUDA "
                    << Hex(want);
    }
  }
  EXPECT_EQ(mismatches, 0) << name;
}

// The bulk decoders on every ISA against CUDA, over all codes.
template <typename T, typename Bulk, typename Cuda>
void ExpectSameBulkDecodes(const char* name, uint32_t codes, Bulk bulk, Cuda cuda) {
  std::vector<T> in(codes);
  for (uint32_t c = 0; c < codes; ++c) in[c] = static_cast<T>(c);
  std::vector<float> out(codes);
  for (Isa isa : testing::SupportedIsas()) {
    bulk(isa, std::span<const T>(in), std::span<float>(out));
    size_t mismatches = 0;
    for (uint32_t c = 0; c < codes; ++c) mismatches += Bits(out[c]) != Bits(cuda(in[c]));
    EXPECT_EQ(mismatches, 0u) << name << " bulk on " << IsaName(isa);
  }
}

TEST(DTypeOracle, BulkDecodeEveryEncoding) {
  ExpectSameBulkDecodes<uint16_t>(
      "bf16", 0x10000, [](Isa isa, auto s, auto d) { BF16ToF32(isa, s, d); }, CudaBF16ToF32);
  ExpectSameBulkDecodes<uint16_t>(
      "f16", 0x10000, [](Isa isa, auto s, auto d) { F16ToF32(isa, s, d); }, CudaF16ToF32);
  ExpectSameBulkDecodes<uint8_t>(
      "e4m3", 0x100, [](Isa isa, auto s, auto d) { E4M3ToF32(isa, s, d); }, CudaE4M3ToF32);
  ExpectSameBulkDecodes<uint8_t>(
      "e5m2", 0x100, [](Isa isa, auto s, auto d) { E5M2ToF32(isa, s, d); }, CudaE5M2ToF32);
}

TEST(DTypeOracle, DecodeEveryEncoding) {
  ExpectSameDecodes(
      "bf16", 0x10000, [](uint32_t c) { return BF16ToF32(static_cast<uint16_t>(c)); },
      [](uint32_t c) { return CudaBF16ToF32(static_cast<uint16_t>(c)); });
  ExpectSameDecodes(
      "f16", 0x10000, [](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); },
      [](uint32_t c) { return CudaF16ToF32(static_cast<uint16_t>(c)); });
  ExpectSameDecodes(
      "e4m3", 0x100, [](uint32_t c) { return E4M3ToF32(static_cast<uint8_t>(c)); },
      [](uint32_t c) { return CudaE4M3ToF32(static_cast<uint8_t>(c)); });
  ExpectSameDecodes(
      "e5m2", 0x100, [](uint32_t c) { return E5M2ToF32(static_cast<uint8_t>(c)); },
      [](uint32_t c) { return CudaE5M2ToF32(static_cast<uint8_t>(c)); });
  ExpectSameDecodes(
      "e8m0", 0x100, [](uint32_t c) { return E8M0ToF32(static_cast<uint8_t>(c)); },
      [](uint32_t c) { return CudaE8M0ToF32(static_cast<uint8_t>(c)); });
}

// ---- encode: boundaries and random f32 ----

class DTypeOracleEncode : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    inputs_ = new std::vector<float>(testing::BoundaryAndRandom(kRandomCount, 0xA11CE));
    std::printf("[          ] %zu boundary + %zu random f32 inputs\n",
                inputs_->size() - kRandomCount, kRandomCount);
  }
  static void TearDownTestSuite() {
    delete inputs_;
    inputs_ = nullptr;
  }

  // `ours` and `cuda` map one input; `bulk` fills a whole output array, and
  // runs on every ISA this CPU supports.
  template <typename T, typename Bulk, typename Ours, typename Cuda>
  static void ExpectSameEncodes(const char* name, Bulk bulk, Ours ours, Cuda cuda) {
    const std::vector<float>& in = *inputs_;
    std::vector<T> want(in.size());
    int mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      want[i] = cuda(in[i]);
      const uint32_t got = ours(in[i]);
      if (got != want[i] && ++mismatches <= 10) {
        ADD_FAILURE() << name << "(" << Hex(Bits(in[i])) << " = " << in[i] << "): anvil "
                      << Hex(got, 2) << ", CUDA " << Hex(want[i], 2);
      }
    }
    EXPECT_EQ(mismatches, 0) << name << " over " << in.size() << " inputs";
    std::vector<T> got(in.size());
    for (Isa isa : testing::SupportedIsas()) {
      bulk(isa, std::span<const float>(in), std::span<T>(got));
      size_t bulk_mismatches = 0;
      for (size_t i = 0; i < in.size(); ++i) bulk_mismatches += got[i] != want[i];
      EXPECT_EQ(bulk_mismatches, 0u) << name << " bulk on " << IsaName(isa);
    }
  }

  static std::vector<float>* inputs_;
};

std::vector<float>* DTypeOracleEncode::inputs_ = nullptr;

TEST_F(DTypeOracleEncode, BF16) {
  ExpectSameEncodes<uint16_t>(
      "bf16", [](Isa isa, auto s, auto d) { F32ToBF16(isa, s, d); },
      [](float x) { return F32ToBF16(x); }, CudaF32ToBF16);
}

TEST_F(DTypeOracleEncode, F16) {
  ExpectSameEncodes<uint16_t>(
      "f16", [](Isa isa, auto s, auto d) { F32ToF16(isa, s, d); },
      [](float x) { return F32ToF16(x); }, CudaF32ToF16);
}

TEST_F(DTypeOracleEncode, E4M3BothOverflowModes) {
  for (Overflow o : {Overflow::kSaturate, Overflow::kNoSaturate}) {
    ExpectSameEncodes<uint8_t>(
        o == Overflow::kSaturate ? "e4m3 satfinite" : "e4m3 nosat",
        [o](Isa isa, auto s, auto d) { F32ToE4M3(isa, s, d, o); },
        [o](float x) { return F32ToE4M3(x, o); }, [o](float x) { return CudaF32ToE4M3(x, o); });
  }
}

TEST_F(DTypeOracleEncode, E5M2BothOverflowModes) {
  for (Overflow o : {Overflow::kSaturate, Overflow::kNoSaturate}) {
    ExpectSameEncodes<uint8_t>(
        o == Overflow::kSaturate ? "e5m2 satfinite" : "e5m2 nosat",
        [o](Isa isa, auto s, auto d) { F32ToE5M2(isa, s, d, o); },
        [o](float x) { return F32ToE5M2(x, o); }, [o](float x) { return CudaF32ToE5M2(x, o); });
  }
}

// CUDA offers cudaRoundZero and cudaRoundPosInf, each with and without saturation.
TEST_F(DTypeOracleEncode, E8M0AllModes) {
  for (E8M0Rounding r : {E8M0Rounding::kTowardZero, E8M0Rounding::kUp}) {
    for (Overflow o : {Overflow::kSaturate, Overflow::kNoSaturate}) {
      const std::string name = std::string("e8m0 ") + (r == E8M0Rounding::kUp ? "rp" : "rz") +
                               (o == Overflow::kSaturate ? " satfinite" : " nosat");
      // No SIMD path for e8m0: the generic entry point runs the scalar loop.
      ExpectSameEncodes<uint8_t>(
          name.c_str(),
          [r, o](Isa isa, std::span<const float> s, std::span<uint8_t> d) {
            const ConvertOptions options = {.overflow = o, .e8m0_rounding = r};
            ConvertFromF32(isa, s.data(), DType::kE8M0, d.data(), static_cast<int64_t>(s.size()),
                           options);
          },
          [r, o](float x) { return F32ToE8M0(x, r, o); },
          [r, o](float x) { return CudaF32ToE8M0(x, r, o); });
    }
  }
}

}  // namespace
}  // namespace anvil
