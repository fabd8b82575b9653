// Test-only: simd.h's operations of one width behind plain function pointers,
// so simd_test.cc (baseline flags) can run each ISA's instantiation after a
// run-time check. One table per tier: simd_test.cc (F32x1),
// simd_test_avx2.cc (F32x8), simd_test_avx512.cc (F32x16).
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"

namespace anvil::kernels::simd_testing {

struct Probe {
  int lanes;
  // y = Exp(x) over n values (whole vectors, then one LoadN/StoreN tail).
  void (*exp)(const float* x, float* y, int64_t n);
  // ReduceSum / ReduceMax of one vector of `lanes` values.
  float (*reduce_sum)(const float* x);
  float (*reduce_max)(const float* x);
  // Store/StoreN to bf16, then Load/LoadN back to f32, over n values.
  void (*bf16_round_trip)(const float* x, BF16* narrowed, float* widened, int64_t n);
  // out[0, lanes) = LoadN(x, n, fill) and LoadN(xb, n, fill).
  void (*load_fill)(const float* x, const BF16* xb, int n, float fill, float* out_f32,
                    float* out_bf16);
  // out = MulAdd(a, b, c), NegMulAdd(a, b, c), Max(a, b), Min(a, b) per lane.
  void (*lanewise)(const float* a, const float* b, const float* c, float* fma, float* fnma,
                   float* max, float* min);
  // y = MulAdd(x, 3, 1) over n values through LoadPair(N)/StorePair(N), for
  // bf16 (xb -> yb) and f32 (xf -> yf).
  void (*pair_fma)(const BF16* xb, BF16* yb, const float* xf, float* yf, int64_t n);
};

const Probe& ScalarProbe();
const Probe& Avx2Probe();
const Probe& Avx512Probe();

}  // namespace anvil::kernels::simd_testing

// The probe functions of one width, for the TU that includes simd.h.
#ifdef ANVIL_SIMD_NS
namespace anvil::kernels::ANVIL_SIMD_NS::probe {

template <typename V>
void ExpN(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) Exp(V::Load(x + i)).Store(y + i);
  if (i < n) Exp(V::LoadN(x + i, static_cast<int>(n - i))).StoreN(y + i, static_cast<int>(n - i));
}

template <typename V>
float Sum(const float* x) {
  return ReduceSum(V::Load(x));
}

template <typename V>
float MaxOf(const float* x) {
  return ReduceMax(V::Load(x));
}

template <typename V>
void Bf16RoundTrip(const float* x, BF16* narrowed, float* widened, int64_t n) {
  int64_t i = 0;
  for (; i + V::kLanes <= n; i += V::kLanes) {
    V::Load(x + i).Store(narrowed + i);
    V::Load(narrowed + i).Store(widened + i);
  }
  if (i < n) {
    const int k = static_cast<int>(n - i);
    V::LoadN(x + i, k).StoreN(narrowed + i, k);
    V::LoadN(narrowed + i, k).StoreN(widened + i, k);
  }
}

template <typename V>
void LoadFill(const float* x, const BF16* xb, int n, float fill, float* out_f32, float* out_bf16) {
  V::LoadN(x, n, fill).Store(out_f32);
  V::LoadN(xb, n, fill).Store(out_bf16);
}

template <typename V>
void Lanewise(const float* a, const float* b, const float* c, float* fma, float* fnma, float* max,
              float* min) {
  const V va = V::Load(a), vb = V::Load(b), vc = V::Load(c);
  MulAdd(va, vb, vc).Store(fma);
  NegMulAdd(va, vb, vc).Store(fnma);
  Max(va, vb).Store(max);
  Min(va, vb).Store(min);
}

template <typename V, typename T>
void PairFmaOf(const T* x, T* y, int64_t n) {
  constexpr int64_t kStep = 2 * V::kLanes;
  const V three = V::Set(3.0f), one = V::Set(1.0f);
  V a, b;
  int64_t i = 0;
  for (; i + kStep <= n; i += kStep) {
    LoadPair(x + i, a, b);
    StorePair(y + i, MulAdd(a, three, one), MulAdd(b, three, one));
  }
  if (i < n) {
    const int k = static_cast<int>(n - i);
    LoadPairN(x + i, k, a, b);
    StorePairN(y + i, k, MulAdd(a, three, one), MulAdd(b, three, one));
  }
}

template <typename V>
void PairFma(const BF16* xb, BF16* yb, const float* xf, float* yf, int64_t n) {
  PairFmaOf<V>(xb, yb, n);
  PairFmaOf<V>(xf, yf, n);
}

template <typename V>
constexpr simd_testing::Probe MakeProbe() {
  return {V::kLanes,        ExpN<V>,     Sum<V>,      MaxOf<V>,
          Bf16RoundTrip<V>, LoadFill<V>, Lanewise<V>, PairFma<V>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::probe
#endif
