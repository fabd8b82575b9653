// Embedding kernels, written once over the vector type V (simd.h) and
// instantiated per tier by embedding.cc (F32x1), embedding_avx2.cc and
// embedding_avx512.cc. Forward covers a range of tokens; backward a range of
// columns over all tokens. Ids were checked by embedding.cc.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::embedding_internal {

// Backward's column granularity: one 64-byte line of f32, so threads never
// write the same line of dtable.
inline constexpr int64_t kColumnBlock = 16;

template <typename In, typename Out>
struct Args {
  int64_t dim;
  const int32_t* ids;
  const In* src;  // forward: table; backward: dout
  Out* dst;       // forward: out; backward: dtable
};

struct Kernels {
  void (*forward_f32_to_bf16)(const Args<float, BF16>&, int64_t token_begin, int64_t token_end);
  void (*backward_f32)(const Args<float, float>&, int64_t tokens, int64_t col_begin,
                       int64_t col_end);
  void (*backward_bf16)(const Args<BF16, float>&, int64_t tokens, int64_t col_begin,
                        int64_t col_end);
};

const Kernels& ScalarKernels();  // embedding.cc
const Kernels& Avx2Kernels();    // embedding_avx2.cc
const Kernels& Avx512Kernels();  // embedding_avx512.cc

}  // namespace anvil::kernels::embedding_internal

namespace anvil::kernels::ANVIL_SIMD_NS::embedding {

using embedding_internal::Args;

template <typename V, typename In, typename Out>
void ForwardConvert(const Args<In, Out>& a, int64_t token_begin, int64_t token_end) {
  constexpr int64_t L = V::kLanes;
  for (int64_t t = token_begin; t < token_end; ++t) {
    const In* row = a.src + a.ids[t] * a.dim;
    Out* out = a.dst + t * a.dim;
    int64_t c = 0;
    for (; c + L <= a.dim; c += L) V::Load(row + c).Store(out + c);
    if (c < a.dim)
      V::LoadN(row + c, static_cast<int>(a.dim - c)).StoreN(out + c, static_cast<int>(a.dim - c));
  }
}

template <typename V, typename In>
void Backward(const Args<In, float>& a, int64_t tokens, int64_t col_begin, int64_t col_end) {
  constexpr int64_t L = V::kLanes;
  for (int64_t t = 0; t < tokens; ++t) {
    const In* d = a.src + t * a.dim;
    float* row = a.dst + a.ids[t] * a.dim;
    int64_t c = col_begin;
    for (; c + L <= col_end; c += L) (V::Load(row + c) + V::Load(d + c)).Store(row + c);
    if (c < col_end) {
      const int n = static_cast<int>(col_end - c);
      (V::LoadN(row + c, n) + V::LoadN(d + c, n)).StoreN(row + c, n);
    }
  }
}

template <typename V>
constexpr embedding_internal::Kernels MakeKernels() {
  return {ForwardConvert<V, float, BF16>, Backward<V, float>, Backward<V, BF16>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::embedding
