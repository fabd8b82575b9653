// Scalar oracle for the embedding (embedding.h), in double: a gather and a
// scatter-add, token by token.
#pragma once

#include <cstdint>

#include "anvil/kernels/ref/rowwise_common_ref.h"

namespace anvil::kernels::ref {

template <typename T>
void EmbeddingForward(int64_t tokens, int64_t dim, const T* table, const int32_t* ids,
                      double* out) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < dim; ++c) out[t * dim + c] = AsDouble(table[ids[t] * dim + c]);
  }
}

// dtable += scatter(dout) (dtable is double here: exact for the test sizes).
template <typename T>
void EmbeddingBackward(int64_t tokens, int64_t dim, const int32_t* ids, const T* dout,
                       double* dtable) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < dim; ++c) dtable[ids[t] * dim + c] += AsDouble(dout[t * dim + c]);
  }
}

}  // namespace anvil::kernels::ref
