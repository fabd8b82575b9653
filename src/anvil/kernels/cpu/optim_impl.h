// AdamW kernel, written once over the vector type V (simd.h) and instantiated
// per tier by optim.cc (F32x1), optim_avx2.cc and optim_avx512.cc. A call
// covers a range of elements; the f32 scalars were prepared by optim.cc.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::optim_internal {

// Elements per unit of the thread split (elementwise: any split, same bits).
inline constexpr int64_t kBlock = 16384;

struct Args {
  float grad_scale, decay, w1, b2, w2, eps, step_size, bc2_sqrt;
  float* param;
  const float* grad;
  float* m;
  float* v;
  BF16* param_bf16;  // may be null
};

struct Kernels {
  void (*update)(const Args&, int64_t begin, int64_t end);
};

const Kernels& ScalarKernels();  // optim.cc
const Kernels& Avx2Kernels();    // optim_avx2.cc
const Kernels& Avx512Kernels();  // optim_avx512.cc

}  // namespace anvil::kernels::optim_internal

namespace anvil::kernels::ANVIL_SIMD_NS::optim {

using optim_internal::Args;

// The formula of optim.h on lanes [i, i + n) (n == kLanes: full vectors).
template <typename V, bool kSmallW1, bool kBf16>
inline void Step(const Args& a, int64_t i, int n) {
  const bool full = n == V::kLanes;
  const V g = (full ? V::Load(a.grad + i) : V::LoadN(a.grad + i, n)) * V::Set(a.grad_scale);
  V p = (full ? V::Load(a.param + i) : V::LoadN(a.param + i, n)) * V::Set(a.decay);
  V m = full ? V::Load(a.m + i) : V::LoadN(a.m + i, n);
  V v = full ? V::Load(a.v + i) : V::LoadN(a.v + i, n);
  if constexpr (kSmallW1) {
    m = MulAdd(V::Set(a.w1), g - m, m);
  } else {
    m = MulAdd(V::Set(a.w1 - 1.0f), g - m, g);
  }
  v = v * V::Set(a.b2) + (V::Set(a.w2) * g) * g;
  const V denom = Sqrt(v) / V::Set(a.bc2_sqrt) + V::Set(a.eps);
  p = p + (V::Set(a.step_size) * m) / denom;
  if (full) {
    p.Store(a.param + i);
    m.Store(a.m + i);
    v.Store(a.v + i);
    if constexpr (kBf16) p.Store(a.param_bf16 + i);
  } else {
    p.StoreN(a.param + i, n);
    m.StoreN(a.m + i, n);
    v.StoreN(a.v + i, n);
    if constexpr (kBf16) p.StoreN(a.param_bf16 + i, n);
  }
}

template <typename V, bool kSmallW1, bool kBf16>
void Loop(const Args& a, int64_t begin, int64_t end) {
  constexpr int64_t L = V::kLanes;
  int64_t i = begin;
  for (; i + L <= end; i += L) Step<V, kSmallW1, kBf16>(a, i, L);
  if (i < end) Step<V, kSmallW1, kBf16>(a, i, static_cast<int>(end - i));
}

template <typename V>
void Update(const Args& a, int64_t begin, int64_t end) {
  const bool small = a.w1 < 0.5f, bf16 = a.param_bf16 != nullptr;
  if (small && bf16) Loop<V, true, true>(a, begin, end);
  if (small && !bf16) Loop<V, true, false>(a, begin, end);
  if (!small && bf16) Loop<V, false, true>(a, begin, end);
  if (!small && !bf16) Loop<V, false, false>(a, begin, end);
}

template <typename V>
constexpr optim_internal::Kernels MakeKernels() {
  return {Update<V>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::optim
