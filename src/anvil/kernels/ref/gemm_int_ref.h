// Scalar oracle for the integer GEMMs (gemm_int.h), written from the header's
// definitions on plain arrays: the codes and scales of the activations and
// weights, and y in the documented order. The fast paths must match it bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "anvil/kernels/gemm_int.h"

namespace anvil::kernels::ref {

struct IntBlock {
  float scale = 0;
  std::vector<int> codes;
};

// Symmetric codes of v[0, n) (stride `stride`) with max code `max_code`.
inline IntBlock QuantizeIntBlock(const float* v, int64_t n, int64_t stride, int max_code) {
  IntBlock b;
  b.codes.assign(n, 0);
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = v[i * stride];
    if (std::isnan(x) || std::isinf(x)) {
      b.scale = std::numeric_limits<float>::quiet_NaN();
      return b;
    }
    amax = std::max(amax, std::fabs(x));
  }
  if (amax == 0) return b;
  b.scale = amax / static_cast<float>(max_code);
  const float inv = static_cast<float>(max_code) / amax;
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::nearbyint(v[i * stride] * inv);
    b.codes[i] = std::isfinite(r) ? static_cast<int>(std::clamp(r, -1.0f * max_code, 1.0f * max_code))
                                  : 0;
  }
  return b;
}

struct IntWeightsRef {
  int64_t group = 0, groups = 0;
  std::vector<int> codes;     // [k, n]
  std::vector<float> scales;  // [groups, n]
};

inline IntWeightsRef QuantizeWeightsRef(int64_t k, int64_t n, const float* w, IntBits bits) {
  IntWeightsRef r;
  r.group = bits == IntBits::kInt4 ? kInt4Group : k;
  r.groups = (k + r.group - 1) / r.group;
  r.codes.assign(k * n, 0);
  r.scales.assign(r.groups * n, 0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t g = 0; g < r.groups; ++g) {
      const int64_t k0 = g * r.group, len = std::min(k, k0 + r.group) - k0;
      const IntBlock b = QuantizeIntBlock(w + k0 * n + j, len, n, bits == IntBits::kInt4 ? 7 : 127);
      r.scales[g * n + j] = b.scale;
      for (int64_t i = 0; i < len; ++i) r.codes[(k0 + i) * n + j] = b.codes[i];
    }
  }
  return r;
}

// y [m, n] from x [m, k] (quantized per row here) and the weights' codes.
inline std::vector<float> GemmIntRef(int64_t m, int64_t n, int64_t k, const float* x,
                                     const IntWeightsRef& w, const std::vector<float>* y0) {
  std::vector<float> y(m * n, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    const IntBlock a = QuantizeIntBlock(x + i * k, k, 1, 127);
    for (int64_t j = 0; j < n; ++j) {
      float s = 0;
      for (int64_t g = 0; g < w.groups; ++g) {
        int64_t acc = 0;
        for (int64_t kk = g * w.group; kk < std::min(k, (g + 1) * w.group); ++kk) {
          acc += static_cast<int64_t>(a.codes[kk]) * w.codes[kk * n + j];
        }
        const float f = static_cast<float>(acc);
        s = g == 0 ? f * w.scales[g * n + j] : std::fma(f, w.scales[g * n + j], s);
      }
      const float out = s * a.scale;
      y[i * n + j] = y0 != nullptr ? (*y0)[i * n + j] + out : out;
    }
  }
  return y;
}

}  // namespace anvil::kernels::ref
