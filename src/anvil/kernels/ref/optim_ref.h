// Scalar oracle for AdamW (optim.h) in double: the textbook decoupled-decay
// Adam step, no intermediate rounding.
#pragma once

#include <cmath>
#include <cstdint>

namespace anvil::kernels::ref {

inline void AdamWUpdate(double lr, double beta1, double beta2, double eps, double weight_decay,
                        int64_t step, double grad_scale, int64_t n, double* param,
                        const double* grad, double* m, double* v) {
  const double bc1 = 1 - std::pow(beta1, static_cast<double>(step));
  const double bc2 = 1 - std::pow(beta2, static_cast<double>(step));
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i] * grad_scale;
    param[i] *= 1 - lr * weight_decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    param[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
  }
}

}  // namespace anvil::kernels::ref
