// SwiGLU kernels, written once over the vector type V (simd.h) and
// instantiated per tier by act.cc (F32x1), act_avx2.cc and act_avx512.cc.
// Work is cut into units of (token, block of kBlock columns); a call covers a
// range of units. Elementwise, so the cut never changes a bit.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::act_internal {

// Columns per unit of work: a token's row is split so decode (one token)
// still uses every thread.
inline constexpr int64_t kBlock = 2048;

template <typename T>
struct Args {
  int64_t f;
  const T* gate_up;
  const T* dout;
  T* out;  // forward: out; backward: dgate_up
  // Ask for gate and up ahead: set where they outgrow the L2s.
  bool prefetch;
};

struct Kernels {
  void (*forward_f32)(const Args<float>&, int64_t unit_begin, int64_t unit_end);
  void (*forward_bf16)(const Args<BF16>&, int64_t unit_begin, int64_t unit_end);
  void (*backward_f32)(const Args<float>&, int64_t unit_begin, int64_t unit_end);
  void (*backward_bf16)(const Args<BF16>&, int64_t unit_begin, int64_t unit_end);
};

const Kernels& ScalarKernels();  // act.cc
const Kernels& Avx2Kernels();    // act_avx2.cc
const Kernels& Avx512Kernels();  // act_avx512.cc

}  // namespace anvil::kernels::act_internal

namespace anvil::kernels::ANVIL_SIMD_NS::act {

using act_internal::Args;

// sig = 1 / (1 + exp(-g)); e * sig is 1 - sig without cancellation.
template <typename V>
inline V Sigmoid(V g, V& e) {
  e = Exp(V::Zero() - g);
  return V::Set(1.0f) / (V::Set(1.0f) + e);
}

template <typename V>
inline V Forward(V g, V u) {
  V e;
  return (g * Sigmoid(g, e)) * u;
}

template <typename V>
inline void Backward(V g, V u, V d, V& dgate, V& dup) {
  V e;
  const V sig = Sigmoid(g, e);
  dup = d * (g * sig);
  // For g < -88.7, e = inf and sig = 0: e * sig is NaN, where 1 - sig = 1.
  // Min returns its second operand for NaN (simd.h), so the clamp fixes
  // exactly that case and changes nothing else (e * sig < 1); a NaN g
  // still gives NaN through g * ....
  const V one_minus_sig = Min(e * sig, V::Set(1.0f));
  dgate = ((d * u) * sig) * MulAdd(g, one_minus_sig, V::Set(1.0f));
}

// Columns [j, j + n) of token t, n <= 2 * kLanes, through pairs (simd.h):
// bf16 loads and stores without shuffles; elementwise, so the lane order of a
// pair does not matter.
template <typename V, typename T, bool kBackward>
inline void Step(const Args<T>& a, int64_t t, int64_t j, int n) {
  const bool full = n == 2 * V::kLanes;
  const T* gp = a.gate_up + t * 2 * a.f + j;
  const T* up = gp + a.f;
  V g0, g1, u0, u1;
  full ? LoadPair(gp, g0, g1) : LoadPairN(gp, n, g0, g1);
  full ? LoadPair(up, u0, u1) : LoadPairN(up, n, u0, u1);
  if constexpr (!kBackward) {
    T* out = a.out + t * a.f + j;
    const V y0 = Forward(g0, u0), y1 = Forward(g1, u1);
    full ? StorePair(out, y0, y1) : StorePairN(out, n, y0, y1);
  } else {
    const T* dp = a.dout + t * a.f + j;
    V d0, d1, dg0, dg1, du0, du1;
    full ? LoadPair(dp, d0, d1) : LoadPairN(dp, n, d0, d1);
    Backward(g0, u0, d0, dg0, du0);
    Backward(g1, u1, d1, dg1, du1);
    T* dg = a.out + t * 2 * a.f + j;
    T* du = dg + a.f;
    if (full) {
      StorePair(dg, dg0, dg1);
      StorePair(du, du0, du1);
    } else {
      StorePairN(dg, n, dg0, dg1);
      StorePairN(du, n, du0, du1);
    }
  }
}

template <typename V, typename T, bool kBackward>
void Run(const Args<T>& a, int64_t unit_begin, int64_t unit_end) {
  constexpr int64_t kStep = 2 * V::kLanes;
  const int64_t blocks = (a.f + act_internal::kBlock - 1) / act_internal::kBlock;
  for (int64_t unit = unit_begin; unit < unit_end; ++unit) {
    const int64_t t = unit / blocks;
    const int64_t begin = (unit % blocks) * act_internal::kBlock;
    const int64_t end = begin + act_internal::kBlock < a.f ? begin + act_internal::kBlock : a.f;
    int64_t j = begin;
    if (V::kLanes > 1 && a.prefetch) {
      // The exponentials and divisions keep the core busy enough that the
      // hardware prefetchers fall behind: gate and up 512 columns ahead, the
      // next token's near a row's end (from DRAM, 2 threads, over several
      // paired runs: forward 1.08-1.29x, backward 0.98-1.17x). A loop of its
      // own, as in norm_impl.h.
      for (; j + kStep <= end; j += kStep) {
        const int64_t col = j + 512;
        const T* ahead =
            col < a.f ? a.gate_up + t * 2 * a.f + col : a.gate_up + (t + 1) * 2 * a.f + (col - a.f);
        PrefetchL2(ahead, kStep * sizeof(T));
        PrefetchL2(ahead + a.f, kStep * sizeof(T));
        Step<V, T, kBackward>(a, t, j, kStep);
      }
    }
    for (; j + kStep <= end; j += kStep) Step<V, T, kBackward>(a, t, j, kStep);
    if (j < end) Step<V, T, kBackward>(a, t, j, static_cast<int>(end - j));
  }
}

template <typename V>
constexpr act_internal::Kernels MakeKernels() {
  return {Run<V, float, false>, Run<V, BF16, false>, Run<V, float, true>, Run<V, BF16, true>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::act
