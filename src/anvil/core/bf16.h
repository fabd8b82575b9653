// BF16: a distinct storage type for bfloat16 values, so kernel signatures say
// what their bits mean (a bare uint16_t could be f16 too). Conversions are the
// bit-exact ones of convert.h.
#pragma once

#include <cstdint>

#include "anvil/core/convert.h"

namespace anvil {

struct BF16 {
  uint16_t bits = 0;
};
static_assert(sizeof(BF16) == 2);

inline constexpr float ToFloat(BF16 x) { return BF16ToF32(x.bits); }
inline constexpr BF16 ToBF16(float x) { return BF16{F32ToBF16(x)}; }

}  // namespace anvil
