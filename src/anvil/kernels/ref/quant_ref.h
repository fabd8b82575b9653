// Scalar oracle for FP8 quantization (quant.h), written for clarity. Unlike
// the other oracles it computes in f32, not double: the scale and the
// element quotient are defined as f32 operations (one correctly rounded
// division or product each), and the casts are core's exact conversions.
// Scale exponents come from std::ilogb here; the fast path derives them from
// the bits, so the two are independent.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "anvil/core/convert.h"
#include "anvil/kernels/quant.h"

namespace anvil::kernels::ref {

inline uint8_t CastFp8(float v, Fp8Format f) {
  return f == Fp8Format::kE4M3 ? F32ToE4M3(v, Overflow::kSaturate)
                               : F32ToE5M2(v, Overflow::kSaturate);
}
inline float DecodeFp8(uint8_t q, Fp8Format f) {
  return f == Fp8Format::kE4M3 ? E4M3ToF32(q) : E5M2ToF32(q);
}

// max |x| over x[0], x[stride], ... (n of them); NaN if any is not finite.
inline float Amax(const float* x, int64_t n, int64_t stride = 1) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i * stride];
    if (!std::isfinite(v)) return std::numeric_limits<float>::quiet_NaN();
    m = std::max(m, std::fabs(v));
  }
  return m;
}

inline float TensorScale(float amax, Fp8Format f, int margin) {
  if (amax == 0.0f || !std::isfinite(amax)) return 1.0f;
  const float s = Fp8Max(f) / amax / std::ldexp(1.0f, margin);
  return std::isfinite(s) ? s : std::numeric_limits<float>::max();
}

// A block's dequantization factor s and, for the MX rules, its E8M0 code.
struct Scale {
  float s = 1.0f;
  uint8_t e8m0 = 0;
};
inline Scale BlockScaleOf(float amax, Fp8Format f, BlockScale rule) {
  if (std::isnan(amax)) return {std::numeric_limits<float>::quiet_NaN(), 0xFF};
  if (rule == BlockScale::kAmax) {
    if (amax == 0.0f) return {1.0f, 0};
    const float q = amax / Fp8Max(f);
    return {q > 0.0f ? q : std::numeric_limits<float>::denorm_min(), 0};
  }
  int e = -127;  // an all-zero block
  if (rule == BlockScale::kMxOcp) {
    if (amax > 0.0f) e = std::ilogb(amax) - Fp8MaxExponent(f);
  } else {
    const float v = amax / Fp8Max(f);
    if (v > 0.0f) {
      e = std::ilogb(v);
      if (v != std::ldexp(1.0f, e)) ++e;  // not a power of two: round up
    }
  }
  e = std::clamp(e, -127, 127);
  return {std::ldexp(1.0f, e), static_cast<uint8_t>(e + 127)};
}

inline void StoreScale(QuantScales out, int64_t i, const Scale& s) {
  if (out.f32 != nullptr) out.f32[i] = s.s;
  if (out.e8m0 != nullptr) out.e8m0[i] = s.e8m0;
}

inline void QuantizeTensor(int64_t n, const float* x, float scale, Fp8Format f, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = CastFp8(x[i] * scale, f);
}

inline void QuantizeTensorTransposed(int64_t rows, int64_t cols, const float* x, float scale,
                                     Fp8Format f, uint8_t* q_t) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) q_t[c * rows + r] = CastFp8(x[r * cols + c] * scale, f);
  }
}

inline void QuantizeRows(int64_t rows, int64_t cols, const float* x, const BlockQuant& b,
                         uint8_t* q, QuantScales scales) {
  const int64_t nb = (cols + b.block - 1) / b.block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t c0 = j * b.block, len = std::min(b.block, cols - c0);
      const float* xs = x + r * cols + c0;
      const Scale s = BlockScaleOf(Amax(xs, len), b.format, b.scale);
      StoreScale(scales, r * nb + j, s);
      for (int64_t c = 0; c < len; ++c) q[r * cols + c0 + c] = CastFp8(xs[c] / s.s, b.format);
    }
  }
}

inline void QuantizeColumnsTransposed(int64_t rows, int64_t cols, const float* x,
                                      const BlockQuant& b, uint8_t* q_t, QuantScales scales) {
  const int64_t nb = (rows + b.block - 1) / b.block;
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t r0 = j * b.block, len = std::min(b.block, rows - r0);
      const Scale s = BlockScaleOf(Amax(x + r0 * cols + c, len, cols), b.format, b.scale);
      StoreScale(scales, c * nb + j, s);
      for (int64_t r = r0; r < r0 + len; ++r)
        q_t[c * rows + r] = CastFp8(x[r * cols + c] / s.s, b.format);
    }
  }
}

inline void QuantizeTiles(int64_t rows, int64_t cols, const float* x, Fp8Format f, int64_t tile,
                          uint8_t* q, float* scales) {
  const int64_t nr = (rows + tile - 1) / tile, nc = (cols + tile - 1) / tile;
  for (int64_t i = 0; i < nr; ++i) {
    for (int64_t j = 0; j < nc; ++j) {
      const int64_t r0 = i * tile, c0 = j * tile;
      const int64_t h = std::min(tile, rows - r0), w = std::min(tile, cols - c0);
      float amax = 0.0f;
      for (int64_t r = r0; r < r0 + h && !std::isnan(amax); ++r) {
        const float a = Amax(x + r * cols + c0, w);
        amax = std::isnan(a) ? a : std::max(amax, a);
      }
      const Scale s = BlockScaleOf(amax, f, BlockScale::kAmax);
      scales[i * nc + j] = s.s;
      for (int64_t r = r0; r < r0 + h; ++r) {
        for (int64_t c = c0; c < c0 + w; ++c) q[r * cols + c] = CastFp8(x[r * cols + c] / s.s, f);
      }
    }
  }
}

}  // namespace anvil::kernels::ref
