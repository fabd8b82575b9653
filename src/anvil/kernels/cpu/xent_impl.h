// Fused softmax cross-entropy row kernels, written once over the vector type V
// (simd.h) and instantiated per tier by xent.cc (F32x1), xent_avx2.cc and
// xent_avx512.cc. A call covers a range of rows; targets were checked by xent.cc.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::xent_internal {

// Logits per chunk of the forward walk: 8 KiB of f32, re-read from L1.
inline constexpr int64_t kChunk = 2048;

template <typename T>
struct Args {
  int64_t vocab;
  const T* logits;
  const int32_t* targets;
  int32_t ignore_index;
  float z_loss_coef;
  float* loss;         // forward
  float* lse;          // forward output / backward input
  const float* dloss;  // backward, may be null
  float dloss_scale;   // backward
  T* dlogits;          // backward
};

struct Kernels {
  void (*forward_f32)(const Args<float>&, int64_t row_begin, int64_t row_end);
  void (*forward_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end);
  void (*backward_f32)(const Args<float>&, int64_t row_begin, int64_t row_end);
  void (*backward_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end);
};

const Kernels& ScalarKernels();  // xent.cc
const Kernels& Avx2Kernels();    // xent_avx2.cc
const Kernels& Avx512Kernels();  // xent_avx512.cc

}  // namespace anvil::kernels::xent_internal

namespace anvil::kernels::ANVIL_SIMD_NS::xent {

using xent_internal::Args;

// Lane-wise running max `m` and sum `s` of exp(x - m) over one chunk of n
// values. Lanes past the end load -inf (exp -> 0, max unchanged).
template <typename V, typename T>
inline void Chunk(const T* x, int64_t n, V& m, V& s) {
  constexpr int64_t L = V::kLanes;
  constexpr float kNegInf = -__builtin_inff();
  V c0 = V::Set(kNegInf), c1 = c0, c2 = c0, c3 = c0;
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    c0 = Max(c0, V::Load(x + i));
    c1 = Max(c1, V::Load(x + i + L));
    c2 = Max(c2, V::Load(x + i + 2 * L));
    c3 = Max(c3, V::Load(x + i + 3 * L));
  }
  for (; i + L <= n; i += L) c0 = Max(c0, V::Load(x + i));
  if (i < n) c1 = Max(c1, V::LoadN(x + i, static_cast<int>(n - i), kNegInf));
  const V mn = Max(m, Max(Max(c0, c1), Max(c2, c3)));
  V a0 = V::Zero(), a1 = a0, a2 = a0, a3 = a0;
  i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    // kChunk logits past this chunk's start (the next chunk; after a short
    // last chunk, the rest of the next row's first), on their way while the
    // exponentials keep the core busy: the max pass above then reads them
    // from L2, not DRAM (from DRAM, 2 threads: f32 1.6x, bf16 1.3x). Asked
    // at every size: in cache the asks cost nothing (4 rows: 1.06-1.11x).
    if constexpr (L > 1) PrefetchL2(x + xent_internal::kChunk + i, 4 * L * sizeof(T));
    a0 = a0 + Exp(V::Load(x + i) - mn);
    a1 = a1 + Exp(V::Load(x + i + L) - mn);
    a2 = a2 + Exp(V::Load(x + i + 2 * L) - mn);
    a3 = a3 + Exp(V::Load(x + i + 3 * L) - mn);
  }
  for (; i + L <= n; i += L) a0 = a0 + Exp(V::Load(x + i) - mn);
  if (i < n) a1 = a1 + Exp(V::LoadN(x + i, static_cast<int>(n - i), kNegInf) - mn);
  s = MulAdd(s, Exp(m - mn), (a0 + a1) + (a2 + a3));
  m = mn;
}

template <typename V, typename T>
void Forward(const Args<T>& a, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int32_t target = a.targets[r];
    if (target == a.ignore_index) {
      a.loss[r] = 0.0f;
      a.lse[r] = 0.0f;
      continue;
    }
    const T* x = a.logits + r * a.vocab;
    // -FLT_MAX, not -inf: m - m stays 0 (not NaN) in lanes no value reached.
    V m = V::Set(-__FLT_MAX__), s = V::Zero();
    for (int64_t c = 0; c < a.vocab; c += xent_internal::kChunk) {
      const int64_t n = a.vocab - c < xent_internal::kChunk ? a.vocab - c : xent_internal::kChunk;
      Chunk(x + c, n, m, s);
    }
    const float max = ReduceMax(m);
    const float sum = ReduceSum(s * Exp(m - V::Set(max)));
    const float lse =
        static_cast<float>(static_cast<double>(max) + __builtin_log(static_cast<double>(sum)));
    const double xt = F32x1::Load(x + target).v;
    a.lse[r] = lse;
    a.loss[r] = static_cast<float>(static_cast<double>(lse) - xt +
                                   static_cast<double>(a.z_loss_coef) * lse * lse);
  }
}

template <typename V, typename T>
void Backward(const Args<T>& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t L = V::kLanes;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int32_t target = a.targets[r];
    const T* x = a.logits + r * a.vocab;
    T* d = a.dlogits + r * a.vocab;
    int64_t v = 0;
    if (target == a.ignore_index) {
      for (; v + L <= a.vocab; v += L) V::Zero().Store(d + v);
      if (v < a.vocab) V::Zero().StoreN(d + v, static_cast<int>(a.vocab - v));
      continue;
    }
    const F32x1 xt = F32x1::Load(x + target);  // before d (maybe x) is written
    const float lse = a.lse[r];
    const float g = (a.dloss != nullptr ? a.dloss[r] : 1.0f) * a.dloss_scale;
    const float scale = g * (1.0f + 2.0f * a.z_loss_coef * lse);
    const V vlse = V::Set(lse), vscale = V::Set(scale);
    // Elementwise, through pairs (simd.h): bf16 without shuffles.
    V a0, a1;
    for (; v + 2 * L <= a.vocab; v += 2 * L) {
      LoadPair(x + v, a0, a1);
      StorePair(d + v, Exp(a0 - vlse) * vscale, Exp(a1 - vlse) * vscale);
    }
    if (v < a.vocab) {
      const int n = static_cast<int>(a.vocab - v);
      LoadPairN(x + v, n, a0, a1);
      StorePairN(d + v, n, Exp(a0 - vlse) * vscale, Exp(a1 - vlse) * vscale);
    }
    // Exp is the same bits at every width, so this is the lane's p exactly.
    MulAdd(Exp(xt - F32x1::Set(lse)), F32x1::Set(scale), F32x1::Set(-g)).Store(d + target);
  }
}

template <typename V>
constexpr xent_internal::Kernels MakeKernels() {
  return {Forward<V, float>, Forward<V, BF16>, Backward<V, float>, Backward<V, BF16>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::xent
