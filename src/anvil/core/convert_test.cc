// Dtype traits and scalar conversions, without CUDA: every code decoded against
// a long-hand decoder and round-tripped; encodes against a long-hand RNE over all
// rounding boundaries and 10^6 random f32; known values. Bulk: convert_bulk_test.
#include "anvil/core/convert.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "anvil/core/convert_testing.h"

namespace anvil {
namespace {

using testing::Bits;
using testing::FloatFormat;
using testing::FromBits;
using testing::Hex;

TEST(DType, Traits) {
  EXPECT_STREQ(DTypeName(DType::kE4M3), "e4m3");
  EXPECT_EQ(DTypeBits(DType::kBF16), 16);
  EXPECT_EQ(DTypeBits(DType::kI4), 4);
  EXPECT_EQ(DTypeBytes(DType::kF32, 3), 12u);
  EXPECT_EQ(DTypeBytes(DType::kI4, 0), 0u);
  EXPECT_EQ(DTypeBytes(DType::kI4, 1), 1u);
  EXPECT_EQ(DTypeBytes(DType::kI4, 7), 4u);
  EXPECT_EQ(DTypeBytes(DType::kI4, 8), 4u);
  EXPECT_TRUE(DTypeIsFloating(DType::kE8M0));
  EXPECT_FALSE(DTypeIsFloating(DType::kI8));
  EXPECT_EQ(DTypeMaxFinite(DType::kE4M3), 448.0);
  EXPECT_EQ(DTypeMaxFinite(DType::kE5M2), 57344.0);
  EXPECT_EQ(DTypeMaxFinite(DType::kF16), 65504.0);
  EXPECT_EQ(DTypeMaxFinite(DType::kBF16), static_cast<double>(BF16ToF32(0x7F7F)));
  EXPECT_EQ(DTypeMaxFinite(DType::kF32), static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(DTypeMaxFinite(DType::kE8M0), std::ldexp(1.0, 127));
  for (DType dtype : kAllDTypes) {
    Result<DType> parsed = ParseDType(DTypeName(dtype));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, dtype);
  }
  const Result<DType> bad = ParseDType("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unknown dtype 'fp8'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("e4m3"), std::string::npos);
}

// ---- decode: every encoding against the long-hand decoder ----

void ExpectDecodes(const FloatFormat& f, float (*decode)(uint32_t), uint32_t nan_bits) {
  for (uint32_t c = 0; c < (1u << f.bits()); ++c) {
    const double want = testing::LongHandDecode(f, c);
    const float got = decode(c);
    if (std::isnan(want)) {
      ASSERT_EQ(Bits(got), nan_bits) << f.name << " code " << Hex(c, 4);
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << f.name << " code " << Hex(c, 4);
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << f.name << " code " << Hex(c, 4);
    }
  }
}

TEST(Convert, DecodeEveryEncoding) {
  ExpectDecodes(
      testing::kF16Format, [](uint32_t c) { return F16ToF32(static_cast<uint16_t>(c)); },
      0x7FFFFFFF);
  ExpectDecodes(
      testing::kE4M3Format, [](uint32_t c) { return E4M3ToF32(static_cast<uint8_t>(c)); },
      0x7FFFFFFF);
  ExpectDecodes(
      testing::kE5M2Format, [](uint32_t c) { return E5M2ToF32(static_cast<uint8_t>(c)); },
      0x7FFFFFFF);
  // bf16 -> f32 keeps a NaN's sign and payload: check every code as a bit shift too.
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const double want = testing::LongHandDecode(testing::kBF16Format, c);
    const float got = BF16ToF32(static_cast<uint16_t>(c));
    ASSERT_EQ(Bits(got), c << 16);
    if (!std::isnan(want)) {
      ASSERT_EQ(static_cast<double>(got), want) << Hex(c, 4);
    }
  }
  for (uint32_t c = 0; c < 0x100; ++c) {
    const double want = testing::LongHandDecodeE8M0(c);
    const float got = E8M0ToF32(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_EQ(Bits(got), 0x7FFF0000u);
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << Hex(c, 2);
    }
  }
  EXPECT_EQ(Bits(E8M0ToF32(0)), 0x00400000u);  // 2^-127 is an f32 subnormal
}

// ---- round trips: decode then encode gives the code back ----

TEST(Convert, RoundTripEveryEncoding) {
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const auto h = static_cast<uint16_t>(c);
    const bool bf16_nan = (c & 0x7FFF) > 0x7F80, f16_nan = (c & 0x7FFF) > 0x7C00;
    ASSERT_EQ(F32ToBF16(BF16ToF32(h)), bf16_nan ? 0x7FFF : c) << Hex(c, 4);
    ASSERT_EQ(F32ToF16(F16ToF32(h)), f16_nan ? 0x7FFF : c) << Hex(c, 4);
  }
  for (uint32_t c = 0; c < 0x100; ++c) {
    const auto b = static_cast<uint8_t>(c);
    const uint32_t mag = c & 0x7F;
    for (Overflow o : {Overflow::kSaturate, Overflow::kNoSaturate}) {
      EXPECT_EQ(F32ToE4M3(E4M3ToF32(b), o), mag == 0x7F ? 0x7F : c) << Hex(c, 2);
      // Saturation also clamps inf, so the inf codes come back as +-max.
      uint32_t e5m2 = mag > 0x7C ? 0x7F : c;
      if (mag == 0x7C && o == Overflow::kSaturate) e5m2 = (c & 0x80) | 0x7B;
      EXPECT_EQ(F32ToE5M2(E5M2ToF32(b), o), e5m2) << Hex(c, 2);
      for (E8M0Rounding r : {E8M0Rounding::kTowardZero, E8M0Rounding::kUp}) {
        EXPECT_EQ(F32ToE8M0(E8M0ToF32(b), r, o), c) << Hex(c, 2);
      }
    }
  }
  for (int i = -128; i <= 127; ++i) EXPECT_EQ(F32ToI8(I8ToF32(static_cast<int8_t>(i))), i);
  for (int i = -8; i <= 7; ++i) {
    EXPECT_EQ(F32ToI4(I4ToF32(static_cast<int8_t>(i))), i);
    for (int j = -8; j <= 7; ++j) {
      const uint8_t byte = PackI4(static_cast<int8_t>(i), static_cast<int8_t>(j));
      EXPECT_EQ(UnpackI4Lo(byte), i);
      EXPECT_EQ(UnpackI4Hi(byte), j);
    }
  }
}

// ---- encode: long-hand round-to-nearest-even in double ----

// The code nearest |x| among `magnitudes` (index == code; the last entry is
// the virtual value past the maximum), ties to the even code. Returns the
// virtual index when the value rounds past the maximum.
uint32_t NearestCode(const std::vector<double>& magnitudes, double a) {
  const auto it = std::upper_bound(magnitudes.begin(), magnitudes.end(), a);
  if (it == magnitudes.end()) return static_cast<uint32_t>(magnitudes.size() - 1);
  const auto hi = static_cast<uint32_t>(it - magnitudes.begin());  // magnitudes[hi] > a
  const uint32_t lo = hi - 1;                                      // magnitudes[lo] <= a
  const double down = a - magnitudes[lo], up = magnitudes[hi] - a;
  if (down < up || (down == up && lo % 2 == 0)) return lo;
  return hi;
}

// Long-hand encoder for the IEEE-like formats and e4m3: NaN -> `nan`; a value
// rounding past the maximum (inf included) -> `overflow` (with the sign).
uint32_t LongHandEncode(const FloatFormat& f, const std::vector<double>& magnitudes, float x,
                        uint32_t nan, uint32_t overflow) {
  if (std::isnan(x)) return nan;
  const uint32_t sign = std::signbit(x) ? 1u << (f.bits() - 1) : 0;
  const uint32_t code = NearestCode(magnitudes, std::fabs(static_cast<double>(x)));
  return sign | (code > f.max_code() ? overflow : code);
}

uint32_t LongHandE8M0(float x, E8M0Rounding rounding, Overflow overflow) {
  if (std::isnan(x)) return 0xFF;
  const double a = std::fabs(static_cast<double>(x));
  int k = 128;  // the result exponent; inf overflows in either rounding
  if (a == 0) {
    k = -127;  // e8m0 has no zero
  } else if (!std::isinf(a)) {
    int e = 0;
    std::frexp(a, &e);          // a = m * 2^e, m in [0.5, 1); e = 0 for a = 0
    k = std::max(e - 1, -127);  // floor(log2 a); e8m0 has nothing below 2^-127
    if (rounding == E8M0Rounding::kUp && a > std::ldexp(1.0, k)) ++k;
  }
  if (k > 127) return overflow == Overflow::kSaturate ? 0xFE : 0xFF;
  return static_cast<uint32_t>(k + 127);
}

int LongHandInt(float x, double lo, double hi) {
  if (std::isnan(x)) return 0;
  return static_cast<int>(std::nearbyint(std::clamp(static_cast<double>(x), lo, hi)));
}

TEST(Convert, EncodeMatchesLongHand) {
  const std::vector<float> inputs = testing::BoundaryAndRandom(1'000'000, 20240611);
  const auto bf16 = testing::MagnitudesWithNext(testing::kBF16Format);
  const auto f16 = testing::MagnitudesWithNext(testing::kF16Format);
  const auto e4m3 = testing::MagnitudesWithNext(testing::kE4M3Format);
  const auto e5m2 = testing::MagnitudesWithNext(testing::kE5M2Format);
  constexpr Overflow kSat = Overflow::kSaturate, kNoSat = Overflow::kNoSaturate;
  int failures = 0;
  auto expect = [&failures](const char* what, float x, uint32_t got, uint32_t want) {
    if (got == want || ++failures > 20) return;
    ADD_FAILURE() << what << "(" << Hex(Bits(x)) << " = " << x << "): got " << Hex(got, 2)
                  << ", want " << Hex(want, 2);
  };
  for (float x : inputs) {
    expect("bf16", x, F32ToBF16(x), LongHandEncode(testing::kBF16Format, bf16, x, 0x7FFF, 0x7F80));
    expect("f16", x, F32ToF16(x), LongHandEncode(testing::kF16Format, f16, x, 0x7FFF, 0x7C00));
    expect("e4m3 sat", x, F32ToE4M3(x, kSat),
           LongHandEncode(testing::kE4M3Format, e4m3, x, 0x7F, 0x7E));
    expect("e4m3 nosat", x, F32ToE4M3(x, kNoSat),
           LongHandEncode(testing::kE4M3Format, e4m3, x, 0x7F, 0x7F));
    expect("e5m2 sat", x, F32ToE5M2(x, kSat),
           LongHandEncode(testing::kE5M2Format, e5m2, x, 0x7F, 0x7B));
    expect("e5m2 nosat", x, F32ToE5M2(x, kNoSat),
           LongHandEncode(testing::kE5M2Format, e5m2, x, 0x7F, 0x7C));
    for (E8M0Rounding r : {E8M0Rounding::kTowardZero, E8M0Rounding::kUp}) {
      for (Overflow o : {kSat, kNoSat}) {
        expect("e8m0", x, F32ToE8M0(x, r, o), LongHandE8M0(x, r, o));
      }
    }
    expect("i8", x, static_cast<uint32_t>(F32ToI8(x)),
           static_cast<uint32_t>(LongHandInt(x, -128, 127)));
    expect("i4", x, static_cast<uint32_t>(F32ToI4(x)),
           static_cast<uint32_t>(LongHandInt(x, -8, 7)));
  }
  EXPECT_EQ(failures, 0);
}

// ---- known values: maxima, subnormals, ties both ways, overflow, specials ----

float Pow2(int k) { return std::ldexp(1.0f, k); }
float Up(float x) { return std::nextafter(x, HUGE_VALF); }
float Down(float x) { return std::nextafter(x, -HUGE_VALF); }
const float kNaN = FromBits(0x7FC00000), kNegNaN = FromBits(0xFFC00001), kInf = HUGE_VALF;

TEST(Convert, KnownBF16AndF16) {
  struct Case {
    float x;
    uint16_t bf16, f16;
  };
  const Case cases[] = {
      {1.0f, 0x3F80, 0x3C00},
      {FromBits(0x3F808000), 0x3F80, 0x3C04},  // bf16 tie, even below
      {FromBits(0x3F818000), 0x3F82, 0x3C0C},  // bf16 tie, odd below: up
      {1.0f + Pow2(-11), 0x3F80, 0x3C00},      // f16 tie, even below
      {1.0f + 3 * Pow2(-11), 0x3F80, 0x3C02},  // f16 tie, odd below: up
      {65504.0f, 0x4780, 0x7BFF},              // f16 max
      {Down(65520.0f), 0x4780, 0x7BFF},
      {65520.0f, 0x4780, 0x7C00},              // f16 max + half ulp: ties to even = inf
      {FromBits(0x7F7F7FFF), 0x7F7F, 0x7C00},  // just below the bf16 overflow tie
      {FromBits(0x7F7F8000), 0x7F80, 0x7C00},  // bf16 overflow tie rounds to inf
      {FromBits(0x00010000), 0x0001, 0x0000},  // bf16 min subnormal
      {FromBits(0x00008000), 0x0000, 0x0000},  // half of it ties to 0
      {FromBits(0x00018000), 0x0002, 0x0000},  // 1.5 units ties to 2
      {Pow2(-24), 0x3380, 0x0001},             // f16 min subnormal
      {Pow2(-25), 0x3300, 0x0000},             // half of it ties to 0
      {Up(Pow2(-25)), 0x3300, 0x0001},
      {3 * Pow2(-25), 0x33C0, 0x0002},          // 1.5 units: up to even
      {5 * Pow2(-25), 0x3420, 0x0002},          // 2.5 units: down to even
      {Pow2(-14) - Pow2(-25), 0x3880, 0x0400},  // ties into the min normal
      {-0.0f, 0x8000, 0x8000},
      {-kInf, 0xFF80, 0xFC00},
      {kNaN, 0x7FFF, 0x7FFF},
      {kNegNaN, 0x7FFF, 0x7FFF},  // CUDA drops the sign and payload
  };
  for (const Case& c : cases) {
    EXPECT_EQ(F32ToBF16(c.x), c.bf16) << Hex(Bits(c.x));
    EXPECT_EQ(F32ToF16(c.x), c.f16) << Hex(Bits(c.x));
  }
}

TEST(Convert, KnownFp8) {
  struct Case {
    float x;
    uint8_t e4m3_sat, e4m3_nosat, e5m2_sat, e5m2_nosat;
  };
  const Case cases[] = {
      {1.0f, 0x38, 0x38, 0x3C, 0x3C},
      {1.0625f, 0x38, 0x38, 0x3C, 0x3C},  // e4m3 tie, even below
      {1.1875f, 0x3A, 0x3A, 0x3D, 0x3D},  // e4m3 tie, odd below: up
      {1.125f, 0x39, 0x39, 0x3C, 0x3C},   // e5m2 tie, even below
      {1.375f, 0x3B, 0x3B, 0x3E, 0x3E},   // e5m2 tie, odd below: up
      {400.0f, 0x7C, 0x7C, 0x5E, 0x5E},   // e4m3 tie 384|416: even 384
      {432.0f, 0x7E, 0x7E, 0x5F, 0x5F},   // e4m3 tie 416|448: even 448
      {448.0f, 0x7E, 0x7E, 0x5F, 0x5F},   // e4m3 max
      {464.0f, 0x7E, 0x7E, 0x5F, 0x5F},   // e4m3 max + half ulp ties down (448 is even)
      {Up(464.0f), 0x7E, 0x7F, 0x5F, 0x5F},
      {-Up(464.0f), 0xFE, 0xFF, 0xDF, 0xDF},  // e4m3 overflow NaN keeps the sign: 0xFF
      {57344.0f, 0x7E, 0x7F, 0x7B, 0x7B},     // e5m2 max
      {Down(61440.0f), 0x7E, 0x7F, 0x7B, 0x7B},
      {61440.0f, 0x7E, 0x7F, 0x7B, 0x7C},  // e5m2 max + half ulp ties up: overflow
      {-1e30f, 0xFE, 0xFF, 0xFB, 0xFC},
      {kInf, 0x7E, 0x7F, 0x7B, 0x7C},  // SATFINITE clamps inf too
      {-kInf, 0xFE, 0xFF, 0xFB, 0xFC},
      {kNaN, 0x7F, 0x7F, 0x7F, 0x7F},
      {kNegNaN, 0x7F, 0x7F, 0x7F, 0x7F},    // CUDA drops the sign
      {Pow2(-6), 0x08, 0x08, 0x24, 0x24},   // e4m3 min normal
      {Pow2(-9), 0x01, 0x01, 0x18, 0x18},   // e4m3 min subnormal
      {Pow2(-10), 0x00, 0x00, 0x14, 0x14},  // half of it ties to 0
      {Up(Pow2(-10)), 0x01, 0x01, 0x14, 0x14},
      {-Pow2(-10), 0x80, 0x80, 0x94, 0x94},  // -0 keeps the sign
      {3 * Pow2(-10), 0x02, 0x02, 0x1A, 0x1A},
      {Pow2(-14), 0x00, 0x00, 0x04, 0x04},  // e5m2 min normal
      {Pow2(-16), 0x00, 0x00, 0x01, 0x01},  // e5m2 min subnormal
      {Pow2(-17), 0x00, 0x00, 0x00, 0x00},
      {3 * Pow2(-17), 0x00, 0x00, 0x02, 0x02},
      {-0.0f, 0x80, 0x80, 0x80, 0x80},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(F32ToE4M3(c.x, Overflow::kSaturate), c.e4m3_sat) << c.x;
    EXPECT_EQ(F32ToE4M3(c.x, Overflow::kNoSaturate), c.e4m3_nosat) << c.x;
    EXPECT_EQ(F32ToE5M2(c.x, Overflow::kSaturate), c.e5m2_sat) << c.x;
    EXPECT_EQ(F32ToE5M2(c.x, Overflow::kNoSaturate), c.e5m2_nosat) << c.x;
  }
}

TEST(Convert, KnownE8M0AndInts) {
  constexpr auto kZ = E8M0Rounding::kTowardZero, kU = E8M0Rounding::kUp;
  constexpr auto kSat = Overflow::kSaturate, kNoSat = Overflow::kNoSaturate;
  struct Case {
    float x;
    uint8_t zero_sat, zero_nosat, up_sat, up_nosat;
  };
  const Case cases[] = {
      {1.0f, 127, 127, 127, 127},
      {1.5f, 127, 127, 128, 128},
      {-1.5f, 127, 127, 128, 128},  // no sign: |x| is rounded
      {0.0f, 0, 0, 0, 0},           // no zero: the smallest scale
      {Pow2(-127), 0, 0, 0, 0},
      {1.5f * Pow2(-127), 0, 0, 1, 1},
      {Pow2(-130), 0, 0, 0, 0},
      {Pow2(127), 254, 254, 254, 254},
      {std::numeric_limits<float>::max(), 254, 254, 254, 255},
      {kInf, 254, 255, 254, 255},
      {kNaN, 255, 255, 255, 255},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(F32ToE8M0(c.x, kZ, kSat), c.zero_sat) << c.x;
    EXPECT_EQ(F32ToE8M0(c.x, kZ, kNoSat), c.zero_nosat) << c.x;
    EXPECT_EQ(F32ToE8M0(c.x, kU, kSat), c.up_sat) << c.x;
    EXPECT_EQ(F32ToE8M0(c.x, kU, kNoSat), c.up_nosat) << c.x;
  }
  EXPECT_EQ(F32ToI8(2.5f), 2);
  EXPECT_EQ(F32ToI8(3.5f), 4);
  EXPECT_EQ(F32ToI8(-2.5f), -2);
  EXPECT_EQ(F32ToI8(-3.5f), -4);
  EXPECT_EQ(F32ToI8(Up(2.5f)), 3);
  EXPECT_EQ(F32ToI8(127.5f), 127);
  EXPECT_EQ(F32ToI8(-128.5f), -128);
  EXPECT_EQ(F32ToI8(1e30f), 127);
  EXPECT_EQ(F32ToI8(-kInf), -128);
  EXPECT_EQ(F32ToI8(kNaN), 0);
  EXPECT_EQ(F32ToI4(6.5f), 6);
  EXPECT_EQ(F32ToI4(5.5f), 6);
  EXPECT_EQ(F32ToI4(7.5f), 7);
  EXPECT_EQ(F32ToI4(-8.5f), -8);
  EXPECT_EQ(F32ToI4(-7.5f), -8);
  EXPECT_EQ(F32ToI4(kNegNaN), 0);
  EXPECT_EQ(PackI4(-1, 2), 0x2F);
}

}  // namespace
}  // namespace anvil
