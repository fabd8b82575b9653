// ExpRunningSums, AVX-512 tier: ExpF64 eight lanes at a time, the operations
// of ref::ExpF64's fast path in its order (the table read as 16-byte pairs);
// lanes outside it (|x| < 2^-54 or >= 512, inf, NaN: rare, the row's maximum
// once) go through the scalar ExpF64. The running sums stay one scalar chain.
#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/exp_sums_internal.h"
#include "anvil/kernels/exp_sums.h"

namespace anvil::kernels::exp_sums_internal {
namespace {

__m512i Set(uint64_t v) { return _mm512_set1_epi64(static_cast<long long>(v)); }

// The lanes not in `fast`, one by one (a baseline-ISA call, never inlined).
[[gnu::noinline, gnu::cold]] __m512d ExpOutsideFastPath(__m512d x, __m512d y, __mmask8 fast) {
  alignas(64) double xs[8];
  alignas(64) double ys[8];
  _mm512_store_pd(xs, x);
  _mm512_store_pd(ys, y);
  for (int lane = 0; lane < 8; ++lane) {
    if (((fast >> lane) & 1) == 0) ys[lane] = ExpF64(xs[lane]);
  }
  return _mm512_load_pd(ys);
}

// kTable's entries k[0..8): tail (T) and scale bits (H), read as one 16-byte
// pair per lane (eight loads, then two permutes part the pairs), which is
// faster than two 8-lane gathers.
void LookUp(__m512i k, __m512d& tail, __m512i& sbits) {
  alignas(64) uint64_t ks[8];
  _mm512_store_si512(ks, k);
  auto pair = [&](int lane) {
    return _mm_load_si128(reinterpret_cast<const __m128i*>(kTable + 2 * ks[lane]));
  };
  const __m256i p01 = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(0)), pair(1), 1);
  const __m256i p23 = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(2)), pair(3), 1);
  const __m256i p45 = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(4)), pair(5), 1);
  const __m256i p67 = _mm256_inserti128_si256(_mm256_castsi128_si256(pair(6)), pair(7), 1);
  const __m512i lo = _mm512_inserti64x4(_mm512_castsi256_si512(p01), p23, 1);
  const __m512i hi = _mm512_inserti64x4(_mm512_castsi256_si512(p45), p67, 1);
  tail = _mm512_castsi512_pd(
      _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), hi));
  sbits = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15), hi);
}

// Lanes not in `valid` (past the row's end) are computed but never stored.
__m512d Exp8(__m512d x, __mmask8 valid) {
  const __m512i top = _mm512_and_si512(_mm512_srli_epi64(_mm512_castpd_si512(x), 52), Set(0x7ff));
  const __mmask8 fast =
      _mm512_cmplt_epu64_mask(_mm512_sub_epi64(top, Set(kTinyTop)), Set(kBigTop - kTinyTop));
  __m512d kd = _mm512_fmadd_pd(x, _mm512_set1_pd(kInvLn2N), _mm512_set1_pd(kShift));
  const __m512i ki = _mm512_castpd_si512(kd);
  kd = _mm512_sub_pd(kd, _mm512_set1_pd(kShift));
  __m512d r = _mm512_fmadd_pd(kd, _mm512_set1_pd(kNegLn2HiN), x);
  r = _mm512_fmadd_pd(kd, _mm512_set1_pd(kNegLn2LoN), r);
  __m512d tail;
  __m512i entry_sbits;
  LookUp(_mm512_and_si512(ki, Set((1 << kTableBits) - 1)), tail, entry_sbits);
  const __m512i sbits = _mm512_add_epi64(entry_sbits, _mm512_slli_epi64(ki, 52 - kTableBits));
  const __m512d r2 = _mm512_mul_pd(r, r);
  const __m512d p23 = _mm512_fmadd_pd(r, _mm512_set1_pd(kC3), _mm512_set1_pd(kC2));
  const __m512d p45 = _mm512_fmadd_pd(r, _mm512_set1_pd(kC5), _mm512_set1_pd(kC4));
  __m512d tmp = _mm512_fmadd_pd(p23, r2, _mm512_add_pd(r, tail));
  tmp = _mm512_fmadd_pd(_mm512_mul_pd(r2, r2), p45, tmp);
  const __m512d scale = _mm512_castsi512_pd(sbits);
  const __m512d y = _mm512_fmadd_pd(scale, tmp, scale);
  const auto settled = static_cast<__mmask8>(fast | ~valid);
  return settled == 0xff ? y : ExpOutsideFastPath(x, y, settled);
}

}  // namespace

void ExpRunningSumsAvx512(int64_t n, const float* x, double scale, double shift, double* weights,
                          double* sums) {
  const __m512d vscale = _mm512_set1_pd(scale);
  const __m512d vshift = _mm512_set1_pd(-shift);
  // The chain of sums trails the exponentials by kLag elements, so it reads
  // weights long stored (no store forwarding from the 64-byte store) and its
  // adds overlap the next vectors' exponentials.
  constexpr int64_t kLag = 256;
  double sum = 0;
  int64_t chained = 0;
  auto chain_to = [&](int64_t end) {
    for (; chained < end; ++chained) {
      sum += weights[chained];
      sums[chained] = sum;
    }
  };
  for (int64_t i = 0; i < n; i += 8) {
    const int m = n - i < 8 ? static_cast<int>(n - i) : 8;
    const auto lanes = static_cast<__mmask8>((1u << m) - 1);
    const __m256 xf = _mm256_maskz_loadu_ps(lanes, x + i);
    const __m512d w = Exp8(_mm512_fmadd_pd(_mm512_cvtps_pd(xf), vscale, vshift), lanes);
    _mm512_mask_storeu_pd(weights + i, lanes, w);
    chain_to(i + m - kLag);
  }
  chain_to(n);
}

// vmaxps returns its second operand where either is NaN: with the running
// max second (never NaN: it starts at x[0]), a NaN in x never takes over.
int64_t FirstMaxIndexAvx512(int64_t n, const float* x) {
  __m512 m = _mm512_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
  if (i < n) m = _mm512_max_ps(_mm512_mask_loadu_ps(m, tail, x + i), m);
  const __m512 top = _mm512_set1_ps(_mm512_reduce_max_ps(m));
  for (i = 0; i + 16 <= n; i += 16) {
    const __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), top, _CMP_EQ_OQ);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  const __mmask16 eq =
      _mm512_mask_cmp_ps_mask(tail, _mm512_maskz_loadu_ps(tail, x + i), top, _CMP_EQ_OQ);
  return i + __builtin_ctz(eq);  // the largest value is somewhere
}

}  // namespace anvil::kernels::exp_sums_internal
