// Scalar oracle for RoPE (rope.h), in double: angles from pos * theta^(-2i/HD)
// without any table, rotate-half pairs (i, i + HD/2). Inputs of any element
// type; output in double, [tokens, heads, HD] packed (no stride).
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/kernels/ref/rowwise_common_ref.h"

namespace anvil::kernels::ref {

// sign = +1: forward rotation; sign = -1: backward (rotation by -angle).
template <typename T>
void Rope(int64_t tokens, int64_t heads, int64_t head_dim, int64_t token_stride,
          const int32_t* positions, int64_t position_offset, double theta, double sign, const T* x,
          double* y) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    const double pos =
        static_cast<double>((positions != nullptr ? positions[t] : t) + position_offset);
    for (int64_t h = 0; h < heads; ++h) {
      const T* xh = x + t * token_stride + h * head_dim;
      double* yh = y + (t * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const double angle =
            pos * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        const double c = std::cos(angle), s = sign * std::sin(angle);
        const double x1 = AsDouble(xh[i]), x2 = AsDouble(xh[i + half]);
        yh[i] = x1 * c - x2 * s;
        yh[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

}  // namespace anvil::kernels::ref
