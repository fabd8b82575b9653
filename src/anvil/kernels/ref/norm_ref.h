// Scalar oracle for RMSNorm (norm.h), in double, written for clarity. Inputs
// of any element type (f32, bf16, double: double is what finite differences
// perturb); outputs in double. Backward follows the same += / = rule.
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/kernels/ref/rowwise_common_ref.h"

namespace anvil::kernels::ref {

// y[r, c] = x[r, c] * rstd[r] * w[c],  rstd[r] = 1 / sqrt(mean_c x[r, c]^2 + eps).
template <typename T, typename W>
void RmsNormForward(int64_t rows, int64_t dim, const T* x, const W* weight, double eps, double* y,
                    double* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    double ss = 0;
    for (int64_t c = 0; c < dim; ++c) ss += AsDouble(xr[c]) * AsDouble(xr[c]);
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    rstd[r] = rs;
    for (int64_t c = 0; c < dim; ++c) y[r * dim + c] = AsDouble(xr[c]) * rs * AsDouble(weight[c]);
  }
}

// With g = w * dy and s = sum_c g x:  dx = rstd * g - x * rstd^3 * s / dim  (=),
// dweight[c] += sum_r dy[r, c] * x[r, c] * rstd[r]  (+=). rstd is recomputed
// from x (in double), not taken from the forward.
template <typename T, typename W, typename D>
void RmsNormBackward(int64_t rows, int64_t dim, const T* x, const W* weight, double eps,
                     const D* dy, double* dx, double* dweight) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * dim;
    const D* dyr = dy + r * dim;
    double ss = 0;
    for (int64_t c = 0; c < dim; ++c) ss += AsDouble(xr[c]) * AsDouble(xr[c]);
    const double rs = 1.0 / std::sqrt(ss / static_cast<double>(dim) + eps);
    double s = 0;
    for (int64_t c = 0; c < dim; ++c) s += AsDouble(weight[c]) * AsDouble(dyr[c]) * AsDouble(xr[c]);
    for (int64_t c = 0; c < dim; ++c) {
      const double g = AsDouble(weight[c]) * AsDouble(dyr[c]);
      dx[r * dim + c] = rs * g - AsDouble(xr[c]) * rs * rs * rs * s / static_cast<double>(dim);
      dweight[c] += AsDouble(dyr[c]) * AsDouble(xr[c]) * rs;
    }
  }
}

}  // namespace anvil::kernels::ref
