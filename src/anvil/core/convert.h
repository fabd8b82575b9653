// Bit-exact conversions between f32 and every dtype: inline scalar functions
// (for reference kernels) and bulk arrays (scalar/AVX2/AVX-512, equal bit for
// bit). Encodings match NVIDIA's host code in cuda_{bf16,fp16,fp8}.h (CUDA 13).
#pragma once

#include <bit>
#include <cstdint>
#include <span>

#include "anvil/core/cpu_features.h"
#include "anvil/core/dtype.h"

namespace anvil {

// Rounding is round-to-nearest-even taken straight from the f32 bits (never
// through an intermediate format, so no double rounding) and subnormals are
// exact. Nothing depends on the C floating-point environment or MXCSR: the
// F16C instructions of the f16 bulk paths take RNE from their immediate and
// ignore FTZ, and DAZ could only zero f32 subnormals, which round to +-0 in
// f16 anyway (convert_bulk_test runs every bulk path under FTZ+DAZ).
//
// A NaN input gives a canonical NaN without sign, as CUDA's host code does (the
// only signed NaN out is e4m3's 0xFF for negative overflow without saturation):
//   f32 -> bf16/f16: 0x7FFF      f32 -> e4m3/e5m2: 0x7F      f32 -> e8m0: 0xFF
//   f16/e4m3/e5m2 -> f32: 0x7FFFFFFF     e8m0 -> f32: 0x7FFF0000 (CUDA's bf16
//   NaN 0x7FFF widened)     bf16 -> f32: the bits shifted, payload and sign kept.

// What an fp8 (or e8m0) encoder does with a finite value beyond the format's
// range after rounding.
enum class Overflow {
  kSaturate,    // clamp to +-max; +-inf also clamps (CUDA __NV_SATFINITE)
  kNoSaturate,  // e4m3: NaN (0x7F/0xFF by sign), e5m2: +-inf, e8m0: NaN (__NV_NOSAT)
};

// How f32 -> e8m0 rounds |x| to a power of two (e8m0 has no sign: it is dropped).
enum class E8M0Rounding {
  kTowardZero,  // floor(log2|x|)    (cudaRoundZero)
  kUp,          // ceil(log2|x|)     (cudaRoundPosInf, applied to |x|)
};

namespace convert_detail {

inline constexpr uint32_t kF32Abs = 0x7FFFFFFFu;
inline constexpr uint32_t kF32Inf = 0x7F800000u;
inline constexpr uint32_t kF32CanonicalNaN = 0x7FFFFFFFu;  // CUDA's f16/fp8 -> f32 NaN

// Shifts `m` right by `shift` (1..31), rounding to nearest, ties to even.
constexpr uint32_t ShiftRightRne(uint32_t m, uint32_t shift) {
  return (m + (1u << (shift - 1)) - 1u + ((m >> shift) & 1u)) >> shift;
}

// Rounds the finite f32 magnitude bits `a` to a binary format with kMan
// mantissa bits and exponent bias kBias (with subnormals). Returns the format's
// magnitude bits; rounding may carry into the exponent field, which is the
// correct next value (and may be the overflow pattern: callers bound `a`).
template <int kMan, int kBias>
constexpr uint32_t RoundMagnitude(uint32_t a) {
  // Biased f32 exponent of the format's smallest normal.
  constexpr uint32_t kMinNormalExp = 127 - kBias + 1;
  // For f32 subnormals (exponent 0) the subnormal branch below adds a bogus
  // implicit bit; harmless because the shift is then >= 25 and the result 0.
  static_assert(151 - kMan - kBias >= 25, "format reaches f32 subnormals");
  const uint32_t e = a >> 23;
  if (e >= kMinNormalExp) return ShiftRightRne(a - ((127u - kBias) << 23), 23 - kMan);
  // Subnormal in the target: value = m * 2^(e-150), unit 2^(1-kBias-kMan).
  const uint32_t m = (a & 0x7FFFFFu) | 0x800000u;
  uint32_t shift = 151u - kMan - kBias - e;
  if (shift > 25) shift = 25;  // m < 2^24 <= half an ulp: rounds to 0 either way
  return ShiftRightRne(m, shift);
}

// Decodes finite magnitude bits of a format with kMan mantissa bits and bias kBias.
template <int kMan, int kBias>
constexpr uint32_t DecodeMagnitude(uint32_t mag) {
  if (mag >> kMan != 0) return (mag << (23 - kMan)) + ((127u - kBias) << 23);
  if (mag == 0) return 0;
  // Subnormal: mag * 2^(1-kBias-kMan), normalised around its leading one.
  const int lead = std::bit_width(mag) - 1;
  const uint32_t exp = static_cast<uint32_t>(lead + 1 - kBias - kMan + 127);
  return (exp << 23) | ((mag - (1u << lead)) << (23 - lead));
}

}  // namespace convert_detail

// ---- bf16 -------------------------------------------------------------------

constexpr uint16_t F32ToBF16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & convert_detail::kF32Abs) > convert_detail::kF32Inf) return 0x7FFF;
  // Rounding carries into the exponent as it should; FLT_MAX rounds to inf.
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

constexpr float BF16ToF32(uint16_t x) { return std::bit_cast<float>(uint32_t{x} << 16); }

// ---- f16 --------------------------------------------------------------------

constexpr uint16_t F32ToF16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & convert_detail::kF32Abs;
  const uint32_t sign = (u >> 16) & 0x8000u;
  if (a > convert_detail::kF32Inf) return 0x7FFF;
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65536 and inf
  // At or above 65520 (half an ulp past 65504) rounding carries into 0x7C00 = inf.
  return static_cast<uint16_t>(sign | convert_detail::RoundMagnitude<10, 15>(a));
}

constexpr float F16ToF32(uint16_t x) {
  const uint32_t mag = x & 0x7FFFu;
  if (mag > 0x7C00u) return std::bit_cast<float>(convert_detail::kF32CanonicalNaN);
  const uint32_t sign = uint32_t{x & 0x8000u} << 16;
  if (mag == 0x7C00u) return std::bit_cast<float>(sign | convert_detail::kF32Inf);
  return std::bit_cast<float>(sign | convert_detail::DecodeMagnitude<10, 15>(mag));
}

// ---- fp8 e4m3 / e5m2 --------------------------------------------------------

// Overflow starts strictly above 464 = 448 + half an ulp (464 itself ties to 448).
constexpr uint8_t F32ToE4M3(float x, Overflow overflow) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & convert_detail::kF32Abs;
  if (a > convert_detail::kF32Inf) return 0x7F;
  const uint32_t sign = (u >> 24) & 0x80u;
  if (a > 0x43E80000u) {
    return static_cast<uint8_t>(sign | (overflow == Overflow::kSaturate ? 0x7Eu : 0x7Fu));
  }
  return static_cast<uint8_t>(sign | convert_detail::RoundMagnitude<3, 7>(a));
}

constexpr float E4M3ToF32(uint8_t x) {
  const uint32_t mag = x & 0x7Fu;
  if (mag == 0x7Fu) return std::bit_cast<float>(convert_detail::kF32CanonicalNaN);
  const uint32_t sign = uint32_t{x & 0x80u} << 24;
  return std::bit_cast<float>(sign | convert_detail::DecodeMagnitude<3, 7>(mag));
}

// Overflow starts at 61440 = 57344 + half an ulp (the tie rounds to even: up).
constexpr uint8_t F32ToE5M2(float x, Overflow overflow) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t a = u & convert_detail::kF32Abs;
  if (a > convert_detail::kF32Inf) return 0x7F;
  const uint32_t sign = (u >> 24) & 0x80u;
  if (a >= 0x47700000u) {
    return static_cast<uint8_t>(sign | (overflow == Overflow::kSaturate ? 0x7Bu : 0x7Cu));
  }
  return static_cast<uint8_t>(sign | convert_detail::RoundMagnitude<2, 15>(a));
}

constexpr float E5M2ToF32(uint8_t x) {
  const uint32_t mag = x & 0x7Fu;
  if (mag > 0x7Cu) return std::bit_cast<float>(convert_detail::kF32CanonicalNaN);
  const uint32_t sign = uint32_t{x & 0x80u} << 24;
  if (mag == 0x7Cu) return std::bit_cast<float>(sign | convert_detail::kF32Inf);
  return std::bit_cast<float>(sign | convert_detail::DecodeMagnitude<2, 15>(mag));
}

// ---- e8m0 -------------------------------------------------------------------

// e8m0 has no zero: 0 and every |x| below 2^-127 encode as 0x00 (= 2^-127)
// under kTowardZero, as does anything up to 2^-127 under kUp. NaN -> 0xFF;
// inf -> 0xFF, or 0xFE (2^127) when saturating, as is a kUp result past 2^127.
constexpr uint8_t F32ToE8M0(float x, E8M0Rounding rounding, Overflow overflow) {
  const uint32_t a = std::bit_cast<uint32_t>(x) & convert_detail::kF32Abs;
  if (a > convert_detail::kF32Inf) return 0xFF;
  uint32_t e = a >> 23;
  if (rounding == E8M0Rounding::kUp) {
    const uint32_t mantissa = a & 0x7FFFFFu;
    if (e == 0) {
      e = mantissa > 0x400000u ? 1 : 0;  // 0x400000 is 2^-127 itself
    } else if (e < 0xFF && mantissa != 0) {
      ++e;
    }
  }
  if (e == 0xFF && overflow == Overflow::kSaturate) e = 0xFE;
  return static_cast<uint8_t>(e);
}

constexpr float E8M0ToF32(uint8_t x) {
  if (x == 0xFF) return std::bit_cast<float>(uint32_t{0x7FFF0000u});
  if (x == 0) return std::bit_cast<float>(uint32_t{0x00400000u});  // 2^-127: f32 subnormal
  return std::bit_cast<float>(uint32_t{x} << 23);
}

// ---- int8 / int4 ------------------------------------------------------------

namespace convert_detail {
// Round-to-nearest-even of x clamped to [lo, hi]; NaN -> 0. Clamping first is
// the same as rounding then saturating because the bounds are integers. Uses
// no library rounding, so the floating-point environment cannot change it.
constexpr int RoundClampRne(float x, float lo, float hi) {
  if (x != x) return 0;
  x = x < lo ? lo : (x > hi ? hi : x);
  const int t = static_cast<int>(x);             // truncates toward zero; |x| <= 128
  const float frac = x - static_cast<float>(t);  // exact
  if (frac > 0.5f || (frac == 0.5f && (t & 1))) return t + 1;
  if (frac < -0.5f || (frac == -0.5f && (t & 1))) return t - 1;
  return t;
}
}  // namespace convert_detail

// Round to nearest even, saturate to [-128, 127]; NaN -> 0 (quantised data has
// no NaN; 0 keeps a stray NaN from becoming a large value).
constexpr int8_t F32ToI8(float x) {
  return static_cast<int8_t>(convert_detail::RoundClampRne(x, -128.0f, 127.0f));
}
constexpr float I8ToF32(int8_t x) { return static_cast<float>(x); }

// As F32ToI8 for [-8, 7]; the result is an int8_t holding the value.
constexpr int8_t F32ToI4(float x) {
  return static_cast<int8_t>(convert_detail::RoundClampRne(x, -8.0f, 7.0f));
}
constexpr float I4ToF32(int8_t x) { return static_cast<float>(x); }

// int4 storage: element 2i in the low nibble of byte i, 2i+1 in the high one.
constexpr uint8_t PackI4(int8_t lo, int8_t hi) {
  return static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
}
constexpr int8_t UnpackI4Lo(uint8_t byte) {
  return static_cast<int8_t>(static_cast<int8_t>(byte << 4) >> 4);  // sign-extends
}
constexpr int8_t UnpackI4Hi(uint8_t byte) {
  return static_cast<int8_t>(static_cast<int8_t>(byte) >> 4);
}

// ---- bulk -------------------------------------------------------------------
// dst.size() must equal src.size() (CHECKed) and `isa` must be supported by
// this CPU (CHECKed; pick it once with BestIsa()). Every isa gives the same bits.

void F32ToBF16(Isa isa, std::span<const float> src, std::span<uint16_t> dst);
void BF16ToF32(Isa isa, std::span<const uint16_t> src, std::span<float> dst);
void F32ToF16(Isa isa, std::span<const float> src, std::span<uint16_t> dst);
void F16ToF32(Isa isa, std::span<const uint16_t> src, std::span<float> dst);
void F32ToE4M3(Isa isa, std::span<const float> src, std::span<uint8_t> dst, Overflow overflow);
void E4M3ToF32(Isa isa, std::span<const uint8_t> src, std::span<float> dst);
void F32ToE5M2(Isa isa, std::span<const float> src, std::span<uint8_t> dst, Overflow overflow);
void E5M2ToF32(Isa isa, std::span<const uint8_t> src, std::span<float> dst);

// int4 arrays: `packed` holds DTypeBytes(kI4, values.size()) bytes; an odd
// count leaves the last high nibble 0.
void PackI4(std::span<const int8_t> values, std::span<uint8_t> packed);
void UnpackI4(std::span<const uint8_t> packed, std::span<int8_t> values);

// Any dtype from/to f32 over `n` elements (`dst`/`src` hold DTypeBytes(dtype, n)
// bytes). Types without a SIMD path (e8m0, int8, int4) run the scalar loop.
struct ConvertOptions {
  Overflow overflow = Overflow::kSaturate;         // fp8 and e8m0
  E8M0Rounding e8m0_rounding = E8M0Rounding::kUp;  // e8m0; kUp never shrinks a scale
};
void ConvertFromF32(Isa isa, const float* src, DType dtype, void* dst, int64_t n,
                    const ConvertOptions& options = {});
void ConvertToF32(Isa isa, DType dtype, const void* src, float* dst, int64_t n);

}  // namespace anvil
