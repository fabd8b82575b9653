// Test-only helpers for the conversion tests: a long-hand decoder in double that
// shares no code with convert.h, the f32 inputs on every rounding boundary of
// every format, and seeded random f32 reaching every binade and special value.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "anvil/core/cpu_features.h"

namespace anvil::testing {

// A binary float format with sign, exponent and mantissa fields and subnormals.
struct FloatFormat {
  const char* name;
  int exp_bits;
  int man_bits;
  int bias;
  bool has_inf;  // all-ones exponent is inf/NaN (IEEE); else only S.1..1.1..1 is NaN (e4m3)
  int bits() const { return 1 + exp_bits + man_bits; }
  uint32_t max_code() const {  // largest finite magnitude code
    const uint32_t all_ones = (1u << (exp_bits + man_bits)) - 1;
    return has_inf ? all_ones - (1u << man_bits) : all_ones - 1;
  }
};

inline constexpr FloatFormat kBF16Format = {"bf16", 8, 7, 127, true};
inline constexpr FloatFormat kF16Format = {"f16", 5, 10, 15, true};
inline constexpr FloatFormat kE4M3Format = {"e4m3", 4, 3, 7, false};
inline constexpr FloatFormat kE5M2Format = {"e5m2", 5, 2, 15, true};

// sign * mantissa * 2^exponent, computed in double; NaN for NaN codes.
inline double LongHandDecode(const FloatFormat& f, uint32_t code) {
  const bool negative = (code >> (f.exp_bits + f.man_bits)) & 1;
  const uint32_t mag = code & ((1u << (f.exp_bits + f.man_bits)) - 1);
  if (mag > f.max_code()) {
    const bool is_inf = f.has_inf && mag == f.max_code() + 1;
    if (!is_inf) return std::numeric_limits<double>::quiet_NaN();
    return negative ? -HUGE_VAL : HUGE_VAL;
  }
  const int exp_field = static_cast<int>(mag >> f.man_bits);
  const double man_field = static_cast<double>(mag & ((1u << f.man_bits) - 1));
  const double significand = exp_field == 0 ? man_field : man_field + std::ldexp(1.0, f.man_bits);
  const int exponent = (exp_field == 0 ? 1 : exp_field) - f.bias - f.man_bits;
  const double v = std::ldexp(significand, exponent);
  return negative ? -v : v;
}

// e8m0: 2^(e-127); 0xFF is NaN.
inline double LongHandDecodeE8M0(uint32_t code) {
  if (code == 0xFF) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(code) - 127);
}

// Finite non-negative magnitudes of `f` in code order (index == code), then
// one more: the value the top binade's spacing would put after the maximum
// (the "next" value rounding can reach; it means overflow).
inline std::vector<double> MagnitudesWithNext(const FloatFormat& f) {
  std::vector<double> m;
  for (uint32_t c = 0; c <= f.max_code(); ++c) m.push_back(LongHandDecode(f, c));
  m.push_back(2 * m[m.size() - 1] - m[m.size() - 2]);
  return m;
}

inline uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }
inline float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

inline std::string Hex(uint32_t u, int digits = 8) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*X", digits, u);
  return buf;
}

// Values that must not be missed: signed zeros, infinities, NaNs with
// payloads and both signs, f32 extremes, and the int8/int4 rounding ties.
inline std::vector<float> SpecialInputs() {
  std::vector<float> v;
  for (uint32_t u : {0x00000000u, 0x00000001u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu, 0x7F800000u,
                     0x7F800001u, 0x7FC00000u, 0x7FC00001u, 0x7FFFFFFFu, 0x7FA5A5A5u, 0x00400000u,
                     0x00400001u, 0x00600000u, 0x3F800000u}) {
    v.push_back(FromBits(u));
    v.push_back(FromBits(u | 0x80000000u));
  }
  for (int k = -280; k <= 280; ++k) {  // -140 .. 140 in halves: every integer and tie
    const float x = 0.5f * static_cast<float>(k);
    v.insert(v.end(), {x, std::nextafter(x, -1e9f), std::nextafter(x, 1e9f)});
  }
  return v;
}

// For each format: every representable value, its f32 neighbours, the
// midpoints between consecutive values (exact in f32: one more bit than the
// format) and their neighbours, with both signs; this includes the overflow
// thresholds (midpoint of the maximum and the next value). For e8m0: every
// power of two 2^-127..2^127 with neighbours and the values 1.5 * 2^k.
inline std::vector<float> BoundaryInputs() {
  std::vector<float> v = SpecialInputs();
  auto add_with_neighbours = [&v](float x) {
    for (float s : {x, std::nextafter(x, -HUGE_VALF), std::nextafter(x, HUGE_VALF)}) {
      v.push_back(s);
      v.push_back(-s);
    }
  };
  for (const FloatFormat* f : {&kBF16Format, &kF16Format, &kE4M3Format, &kE5M2Format}) {
    const std::vector<double> m = MagnitudesWithNext(*f);
    for (size_t i = 0; i + 1 < m.size(); ++i) {
      add_with_neighbours(static_cast<float>(m[i]));
      const double mid = 0.5 * (m[i] + m[i + 1]);
      add_with_neighbours(static_cast<float>(mid));  // exact: see above
    }
    add_with_neighbours(static_cast<float>(m.back()));  // may be inf for bf16
  }
  for (int k = -127; k <= 127; ++k) {
    add_with_neighbours(std::ldexp(1.0f, k));
    add_with_neighbours(std::ldexp(1.5f, k));
  }
  return v;
}

// Seeded random f32: a quarter raw bit patterns (NaN payloads, subnormals),
// three eighths with a uniform f32 exponent (every binade, 0 and 255
// included), a quarter in 2^-30..2^20 (the fp8/f16 ranges and their
// overflow), and an eighth drawn from SpecialInputs().
inline std::vector<float> RandomInputs(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<float> specials = SpecialInputs();
  std::vector<float> v(n);
  for (float& x : v) {
    const uint64_t r = rng();
    const uint32_t sign = static_cast<uint32_t>(r >> 63) << 31;
    const uint32_t mantissa = static_cast<uint32_t>(r >> 8) & 0x7FFFFFu;
    switch (r & 7) {
      case 0:
      case 1:
        x = FromBits(static_cast<uint32_t>(r >> 32));
        break;
      case 2:
      case 3:
      case 4:
        x = FromBits(sign | (static_cast<uint32_t>((r >> 40) & 0xFF) << 23) | mantissa);
        break;
      case 5:
      case 6:
        x = FromBits(sign | ((97u + static_cast<uint32_t>((r >> 40) % 51)) << 23) | mantissa);
        break;
      default:
        x = specials[(r >> 32) % specials.size()];
        break;
    }
  }
  return v;
}

inline std::vector<float> BoundaryAndRandom(size_t random_count, uint64_t seed) {
  std::vector<float> v = BoundaryInputs();
  const std::vector<float> r = RandomInputs(random_count, seed);
  v.insert(v.end(), r.begin(), r.end());
  return v;
}

// The bulk-conversion paths this CPU can run.
inline std::vector<Isa> SupportedIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

}  // namespace anvil::testing
