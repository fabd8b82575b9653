// AVX2 inner loops of the peak measurements, for CPUs without AVX-512.
#include "anvil/core/intrinsics.h"
#include "anvil/profile/peak.h"

namespace anvil::profile::detail {

// 12 independent accumulators in named registers (AVX2 has 16 ymm registers:
// keep room for the operands); distinct starting values keep the compiler
// from merging identical chains.
double FmaLoopAvx2(long iterations) {
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  auto start = [](int chain) { return _mm256_set1_ps(0.5f + 0.01f * chain); };
  __m256 c0 = start(0), c1 = start(1), c2 = start(2), c3 = start(3), c4 = start(4),
         c5 = start(5), c6 = start(6), c7 = start(7), c8 = start(8), c9 = start(9),
         c10 = start(10), c11 = start(11);
  for (long it = 0; it < iterations; ++it) {
    c0 = _mm256_fmadd_ps(c0, a, b); c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b); c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b); c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b); c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b); c9 = _mm256_fmadd_ps(c9, a, b);
    c10 = _mm256_fmadd_ps(c10, a, b); c11 = _mm256_fmadd_ps(c11, a, b);
  }
  const __m256 total = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                    _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7))),
      _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, total);
  volatile float sink = lanes[0];
  (void)sink;
  return 2.0 * 8 * 12 * static_cast<double>(iterations);
}

double ReadSumAvx2(const float* data, long n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  long i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_load_ps(data + i));
    s1 = _mm256_add_ps(s1, _mm256_load_ps(data + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_load_ps(data + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_load_ps(data + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  float total = 0;
  for (float v : lanes) total += v;
  for (; i < n; ++i) total += data[i];
  return total;
}

}  // namespace anvil::profile::detail
