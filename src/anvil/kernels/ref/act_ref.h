// Scalar oracle for SwiGLU (act.h), in double: out = g * sigmoid(g) * up on the
// [tokens, 2F] gate|up layout, and its derivative. Inputs of any element type.
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/kernels/ref/rowwise_common_ref.h"

namespace anvil::kernels::ref {

inline double Sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

template <typename T>
void SwiGluForward(int64_t tokens, int64_t f, const T* gate_up, double* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < f; ++j) {
      const double g = AsDouble(gate_up[t * 2 * f + j]);
      const double u = AsDouble(gate_up[t * 2 * f + f + j]);
      out[t * f + j] = g * Sigmoid(g) * u;
    }
  }
}

// d/dg [g sig(g)] = sig(g) (1 + g (1 - sig(g))).
template <typename T, typename D>
void SwiGluBackward(int64_t tokens, int64_t f, const T* gate_up, const D* dout, double* dgate_up) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < f; ++j) {
      const double g = AsDouble(gate_up[t * 2 * f + j]);
      const double u = AsDouble(gate_up[t * 2 * f + f + j]);
      const double d = AsDouble(dout[t * f + j]);
      const double sig = Sigmoid(g);
      dgate_up[t * 2 * f + j] = d * u * sig * (1.0 + g * (1.0 - sig));
      dgate_up[t * 2 * f + f + j] = d * g * sig;
    }
  }
}

}  // namespace anvil::kernels::ref
