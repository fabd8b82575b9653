// RoPE token kernels, written once over the vector type V (simd.h) and
// instantiated per tier by rope.cc (F32x1), rope_avx2.cc and rope_avx512.cc.
// Each call covers a range of tokens; positions were checked by rope.cc.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::rope_internal {

template <typename T>
struct Args {
  const float* table;  // [max_positions, HD]: cos | sin
  int64_t head_dim;
  int64_t heads;
  int64_t token_stride;
  const int32_t* positions;  // may be null
  int64_t position_offset;
  T* x;
};

struct Kernels {
  void (*forward_f32)(const Args<float>&, int64_t token_begin, int64_t token_end);
  void (*forward_bf16)(const Args<BF16>&, int64_t token_begin, int64_t token_end);
  void (*backward_f32)(const Args<float>&, int64_t token_begin, int64_t token_end);
  void (*backward_bf16)(const Args<BF16>&, int64_t token_begin, int64_t token_end);
};

const Kernels& ScalarKernels();  // rope.cc
const Kernels& Avx2Kernels();    // rope_avx2.cc
const Kernels& Avx512Kernels();  // rope_avx512.cc

}  // namespace anvil::kernels::rope_internal

namespace anvil::kernels::ANVIL_SIMD_NS::rope {

using rope_internal::Args;

// One group of lanes of one head: x1 = x[i..], x2 = x[i + HD/2..].
template <typename V, bool kBackward>
inline void Rotate(V c, V s, V& x1, V& x2) {
  const V c1 = x1 * c, c2 = x2 * c;
  if constexpr (kBackward) {
    const V y1 = MulAdd(x2, s, c1);
    x2 = NegMulAdd(x1, s, c2);
    x1 = y1;
  } else {
    const V y1 = NegMulAdd(x2, s, c1);
    x2 = MulAdd(x1, s, c2);
    x1 = y1;
  }
}

template <typename V, typename T, bool kBackward>
void Apply(const Args<T>& a, int64_t token_begin, int64_t token_end) {
  constexpr int64_t L = V::kLanes;
  const int64_t half = a.head_dim / 2;
  for (int64_t t = token_begin; t < token_end; ++t) {
    const int64_t pos = (a.positions != nullptr ? a.positions[t] : t) + a.position_offset;
    const float* cos_row = a.table + pos * a.head_dim;
    const float* sin_row = cos_row + half;
    for (int64_t h = 0; h < a.heads; ++h) {
      T* p1 = a.x + t * a.token_stride + h * a.head_dim;
      T* p2 = p1 + half;
      int64_t i = 0;
      for (; i + L <= half; i += L) {
        V x1 = V::Load(p1 + i), x2 = V::Load(p2 + i);
        Rotate<V, kBackward>(V::Load(cos_row + i), V::Load(sin_row + i), x1, x2);
        x1.Store(p1 + i);
        x2.Store(p2 + i);
      }
      if (i < half) {
        const int n = static_cast<int>(half - i);
        V x1 = V::LoadN(p1 + i, n), x2 = V::LoadN(p2 + i, n);
        Rotate<V, kBackward>(V::LoadN(cos_row + i, n), V::LoadN(sin_row + i, n), x1, x2);
        x1.StoreN(p1 + i, n);
        x2.StoreN(p2 + i, n);
      }
    }
  }
}

template <typename V>
constexpr rope_internal::Kernels MakeKernels() {
  return {Apply<V, float, false>, Apply<V, BF16, false>, Apply<V, float, true>,
          Apply<V, BF16, true>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::rope
