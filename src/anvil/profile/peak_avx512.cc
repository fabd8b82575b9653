// AVX-512 inner loops of the peak measurements (compiled with AVX-512 flags;
// called only after a run-time check).
#include "anvil/core/intrinsics.h"
#include "anvil/profile/peak.h"

namespace anvil::profile::detail {

namespace {
constexpr int kAccumulators = 16;

// Horizontal sum. (GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.)
float SumLanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

__m512 Start(int chain) { return _mm512_set1_ps(0.5f + 0.01f * chain); }
}  // namespace

// 16 independent accumulators in named registers: more chains than FMA latency
// x pipes on current cores, so the pipes never wait. `step` is one FMA-like op.
// Distinct starting values keep the compiler from merging identical chains.
#define ANVIL_PEAK_LOOP(init, step)                                                          \
  __m512 c0 = init(0), c1 = init(1), c2 = init(2), c3 = init(3), c4 = init(4),             \
         c5 = init(5), c6 = init(6), c7 = init(7), c8 = init(8), c9 = init(9),               \
         c10 = init(10), c11 = init(11), c12 = init(12), c13 = init(13), c14 = init(14),     \
         c15 = init(15);                                                                     \
  for (long it = 0; it < iterations; ++it) {                                                 \
    c0 = step(c0); c1 = step(c1); c2 = step(c2); c3 = step(c3);                              \
    c4 = step(c4); c5 = step(c5); c6 = step(c6); c7 = step(c7);                              \
    c8 = step(c8); c9 = step(c9); c10 = step(c10); c11 = step(c11);                          \
    c12 = step(c12); c13 = step(c13); c14 = step(c14); c15 = step(c15);                      \
  }                                                                                          \
  const __m512 total = _mm512_add_ps(                                                        \
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),            \
                    _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),           \
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),          \
                    _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));      \
  volatile float sink = SumLanes(total);                                                     \
  (void)sink

double FmaLoopAvx512(long iterations) {
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-7f);
  auto fma = [&](__m512 c) { return _mm512_fmadd_ps(c, a, b); };
  ANVIL_PEAK_LOOP(Start, fma);
  return 2.0 * 16 * kAccumulators * static_cast<double>(iterations);
}

double Bf16DotLoopAvx512(long iterations) {
  const __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh b = (__m512bh)_mm512_set1_epi16(0x3380);  // bf16 ~6e-8
  auto dot = [&](__m512 c) { return _mm512_dpbf16_ps(c, a, b); };
  ANVIL_PEAK_LOOP(Start, dot);
  // 16 lanes x 2 bf16 pairs x (multiply + add).
  return 2.0 * 2 * 16 * kAccumulators * static_cast<double>(iterations);
}

#undef ANVIL_PEAK_LOOP

double ReadSumAvx512(const float* data, long n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  long i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_load_ps(data + i));
    s1 = _mm512_add_ps(s1, _mm512_load_ps(data + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_load_ps(data + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_load_ps(data + i + 48));
  }
  float rest = 0;
  for (; i < n; ++i) rest += data[i];
  return SumLanes(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))) + rest;
}

}  // namespace anvil::profile::detail
