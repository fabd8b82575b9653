// ExpRunningSums, AVX2 tier: ExpF64 four lanes at a time, the operations of
// ref::ExpF64's fast path in its order (the table read as 16-byte pairs);
// lanes outside it (|x| < 2^-54 or >= 512, inf, NaN: rare, the row's maximum
// once) go through the scalar ExpF64. The running sums stay one scalar chain.
#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/exp_sums_internal.h"
#include "anvil/kernels/exp_sums.h"

namespace anvil::kernels::exp_sums_internal {
namespace {

__m256i Set(uint64_t v) { return _mm256_set1_epi64x(static_cast<long long>(v)); }

// The lanes whose mask bit is clear, one by one (a baseline-ISA call).
[[gnu::noinline, gnu::cold]] __m256d ExpOutsideFastPath(__m256d x, __m256d y, int fast) {
  alignas(32) double xs[4];
  alignas(32) double ys[4];
  _mm256_store_pd(xs, x);
  _mm256_store_pd(ys, y);
  for (int lane = 0; lane < 4; ++lane) {
    if (((fast >> lane) & 1) == 0) ys[lane] = ExpF64(xs[lane]);
  }
  return _mm256_load_pd(ys);
}

// kTable's entries k[0..4): tail (T) and scale bits (H), read as one 16-byte
// pair per lane (four loads, then two unpacks part the pairs), which is
// faster than two gathers.
void LookUp(__m256i k, __m256d& tail, __m256i& sbits) {
  alignas(32) uint64_t ks[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(ks), k);
  auto pair = [&](int lane) {
    return _mm_load_si128(reinterpret_cast<const __m128i*>(kTable + 2 * ks[lane]));
  };
  const __m256i p02 = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(0)), pair(2), 1);
  const __m256i p13 = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(1)), pair(3), 1);
  tail = _mm256_castsi256_pd(_mm256_unpacklo_epi64(p02, p13));
  sbits = _mm256_unpackhi_epi64(p02, p13);
}

// Lanes not in `valid` (past the row's end) are computed but never stored.
__m256d Exp4(__m256d x, int valid) {
  const __m256i top = _mm256_and_si256(_mm256_srli_epi64(_mm256_castpd_si256(x), 52), Set(0x7ff));
  // kTinyTop <= top < kBigTop (the fields are small: signed compares do).
  const __m256i fast_lanes = _mm256_andnot_si256(_mm256_cmpgt_epi64(Set(kTinyTop), top),
                                                 _mm256_cmpgt_epi64(Set(kBigTop), top));
  const int fast = _mm256_movemask_pd(_mm256_castsi256_pd(fast_lanes));
  __m256d kd = _mm256_fmadd_pd(x, _mm256_set1_pd(kInvLn2N), _mm256_set1_pd(kShift));
  const __m256i ki = _mm256_castpd_si256(kd);
  kd = _mm256_sub_pd(kd, _mm256_set1_pd(kShift));
  __m256d r = _mm256_fmadd_pd(kd, _mm256_set1_pd(kNegLn2HiN), x);
  r = _mm256_fmadd_pd(kd, _mm256_set1_pd(kNegLn2LoN), r);
  __m256d tail;
  __m256i entry_sbits;
  LookUp(_mm256_and_si256(ki, Set((1 << kTableBits) - 1)), tail, entry_sbits);
  const __m256i sbits = _mm256_add_epi64(entry_sbits, _mm256_slli_epi64(ki, 52 - kTableBits));
  const __m256d r2 = _mm256_mul_pd(r, r);
  const __m256d p23 = _mm256_fmadd_pd(r, _mm256_set1_pd(kC3), _mm256_set1_pd(kC2));
  const __m256d p45 = _mm256_fmadd_pd(r, _mm256_set1_pd(kC5), _mm256_set1_pd(kC4));
  __m256d tmp = _mm256_fmadd_pd(p23, r2, _mm256_add_pd(r, tail));
  tmp = _mm256_fmadd_pd(_mm256_mul_pd(r2, r2), p45, tmp);
  const __m256d scale = _mm256_castsi256_pd(sbits);
  const __m256d y = _mm256_fmadd_pd(scale, tmp, scale);
  const int settled = fast | (~valid & 0xf);
  return settled == 0xf ? y : ExpOutsideFastPath(x, y, settled);
}

}  // namespace

void ExpRunningSumsAvx2(int64_t n, const float* x, double scale, double shift, double* weights,
                        double* sums) {
  const __m256d vscale = _mm256_set1_pd(scale);
  const __m256d vshift = _mm256_set1_pd(-shift);
  // The chain of sums trails the exponentials by kLag elements, so it reads
  // weights long stored (no store forwarding) and its adds overlap the next
  // vectors' exponentials.
  constexpr int64_t kLag = 256;
  double sum = 0;
  int64_t chained = 0;
  auto chain_to = [&](int64_t end) {
    for (; chained < end; ++chained) {
      sum += weights[chained];
      sums[chained] = sum;
    }
  };
  auto exp4 = [&](__m128 xf, int valid) {
    return Exp4(_mm256_fmadd_pd(_mm256_cvtps_pd(xf), vscale, vshift), valid);
  };
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    _mm256_storeu_pd(weights + i, exp4(_mm_loadu_ps(x + i), 0xf));
    chain_to(i + 4 - kLag);
  }
  if (i < n) {  // the last 1-3 elements
    const int m = static_cast<int>(n - i);
    alignas(16) float xs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    alignas(32) double ws[4];
    for (int j = 0; j < m; ++j) xs[j] = x[i + j];
    _mm256_store_pd(ws, exp4(_mm_load_ps(xs), (1 << m) - 1));
    for (int j = 0; j < m; ++j) weights[i + j] = ws[j];
  }
  chain_to(n);
}

// vmaxps returns its second operand where either is NaN: with the running
// max second (never NaN: it starts at x[0]), a NaN in x never takes over.
int64_t FirstMaxIndexAvx2(int64_t n, const float* x) {
  __m256 m = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)), lanes);
  if (i < n) {
    const __m256 v =
        _mm256_blendv_ps(m, _mm256_maskload_ps(x + i, tail), _mm256_castsi256_ps(tail));
    m = _mm256_max_ps(v, m);
  }
  // The lanes' max (no NaN among them: any order gives it).
  __m256 r = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
  r = _mm256_max_ps(r, _mm256_permute_ps(r, 0x4E));
  r = _mm256_max_ps(r, _mm256_permute_ps(r, 0xB1));
  for (i = 0; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), r, _CMP_EQ_OQ));
    if (eq != 0) return i + __builtin_ctz(static_cast<unsigned>(eq));
  }
  const int eq = _mm256_movemask_ps(_mm256_and_ps(
      _mm256_cmp_ps(_mm256_maskload_ps(x + i, tail), r, _CMP_EQ_OQ), _mm256_castsi256_ps(tail)));
  return i + __builtin_ctz(static_cast<unsigned>(eq));  // the largest value is somewhere
}

}  // namespace anvil::kernels::exp_sums_internal
