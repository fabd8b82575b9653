// Scalar oracle for fused softmax cross-entropy (xent.h), in double: lse by the
// textbook max-shifted sum, loss with z-loss, and the gradient
// (softmax (1 + 2 z lse) - onehot) * g. Ignored rows: loss 0, lse 0, zero gradient.
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/kernels/ref/rowwise_common_ref.h"

namespace anvil::kernels::ref {

template <typename T>
double LogSumExp(int64_t vocab, const T* x) {
  double m = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) m = std::max(m, AsDouble(x[v]));
  double s = 0;
  for (int64_t v = 0; v < vocab; ++v) s += std::exp(AsDouble(x[v]) - m);
  return m + std::log(s);
}

// Returns the number of valid rows; loss and lse are [rows].
template <typename T>
int64_t CrossEntropyForward(int64_t rows, int64_t vocab, const T* logits, const int32_t* targets,
                            int32_t ignore_index, double z_loss_coef, double* loss, double* lse) {
  int64_t valid = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) {
      loss[r] = 0;
      lse[r] = 0;
      continue;
    }
    ++valid;
    const T* x = logits + r * vocab;
    lse[r] = LogSumExp(vocab, x);
    loss[r] = lse[r] - AsDouble(x[targets[r]]) + z_loss_coef * lse[r] * lse[r];
  }
  return valid;
}

// g[r] = (dloss ? dloss[r] : 1) * dloss_scale; lse recomputed in double.
template <typename T>
void CrossEntropyBackward(int64_t rows, int64_t vocab, const T* logits, const int32_t* targets,
                          int32_t ignore_index, double z_loss_coef, const double* dloss,
                          double dloss_scale, double* dlogits) {
  for (int64_t r = 0; r < rows; ++r) {
    double* d = dlogits + r * vocab;
    if (targets[r] == ignore_index) {
      for (int64_t v = 0; v < vocab; ++v) d[v] = 0;
      continue;
    }
    const T* x = logits + r * vocab;
    const double lse = LogSumExp(vocab, x);
    const double g = (dloss != nullptr ? dloss[r] : 1.0) * dloss_scale;
    for (int64_t v = 0; v < vocab; ++v) {
      const double p = std::exp(AsDouble(x[v]) - lse);
      d[v] = (p * (1.0 + 2.0 * z_loss_coef * lse) - (v == targets[r] ? 1.0 : 0.0)) * g;
    }
  }
}

}  // namespace anvil::kernels::ref
