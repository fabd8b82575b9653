// Element types and their traits. Sub-byte types (int4) pack two elements per
// byte, low nibble first, so byte sizes round up. Conversions live in convert.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "anvil/core/status.h"

namespace anvil {

enum class DType : uint8_t {
  kF32,   // IEEE binary32
  kBF16,  // bfloat16: f32's top half
  kF16,   // IEEE binary16
  kE4M3,  // OCP fp8 E4M3 ("fn": no infinities, NaN = S.1111.111, max 448)
  kE5M2,  // OCP fp8 E5M2 (IEEE-like: has infinities, max 57344)
  kE8M0,  // OCP MX shared scale: 2^(e-127), 0xFF = NaN, no sign, no zero
  kI8,    // two's complement [-128, 127]
  kI4,    // two's complement [-8, 7], two per byte, low nibble first
};

inline constexpr std::array<DType, 8> kAllDTypes = {
    DType::kF32,  DType::kBF16, DType::kF16, DType::kE4M3,
    DType::kE5M2, DType::kE8M0, DType::kI8,  DType::kI4,
};

namespace dtype_detail {
struct Traits {
  std::string_view name;
  int bits;
  bool is_floating;
  double max_finite;  // largest finite value; for integers the largest integer
};
// Indexed by DType. Maxima are exact in double: f32 (2-2^-23)*2^127,
// bf16 (2-2^-7)*2^127, f16 65504, e4m3 448, e5m2 57344, e8m0 2^127.
inline constexpr std::array<Traits, 8> kTraits = {{
    {"f32", 32, true, 3.4028234663852886e38},
    {"bf16", 16, true, 3.3895313892515355e38},
    {"f16", 16, true, 65504.0},
    {"e4m3", 8, true, 448.0},
    {"e5m2", 8, true, 57344.0},
    {"e8m0", 8, true, 1.7014118346046923e38},
    {"i8", 8, false, 127.0},
    {"i4", 4, false, 7.0},
}};
constexpr const Traits& Of(DType dtype) { return kTraits[static_cast<size_t>(dtype)]; }
}  // namespace dtype_detail

// "f32", "bf16", "f16", "e4m3", "e5m2", "e8m0", "i8", "i4".
constexpr const char* DTypeName(DType dtype) { return dtype_detail::Of(dtype).name.data(); }

// Storage bits per element (4 for int4).
constexpr int DTypeBits(DType dtype) { return dtype_detail::Of(dtype).bits; }

// Bytes that hold `n` elements, rounded up to whole bytes (int4: (n + 1) / 2).
constexpr size_t DTypeBytes(DType dtype, int64_t n) {
  if (n < 0) CheckFailed(__FILE__, __LINE__, "DTypeBytes: negative element count");
  return (static_cast<size_t>(n) * static_cast<size_t>(DTypeBits(dtype)) + 7) / 8;
}

constexpr bool DTypeIsFloating(DType dtype) { return dtype_detail::Of(dtype).is_floating; }

// Largest finite value (for the integer types, the largest integer).
constexpr double DTypeMaxFinite(DType dtype) { return dtype_detail::Of(dtype).max_finite; }

// Inverse of DTypeName; an unknown name is an InvalidArgument that lists the
// valid ones (it usually comes from a config file or a flag).
Result<DType> ParseDType(std::string_view name);

}  // namespace anvil
