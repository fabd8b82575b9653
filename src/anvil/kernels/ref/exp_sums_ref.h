// Scalar ExpF64 and ExpRunningSums (exp_sums.h): the portable tier, and the
// oracle the SIMD tiers must equal bit for bit. ExpF64 is checked in turn
// against glibc's exp. Compiled without FMA contraction: every fused
// operation is an explicit std::fma, every other one rounds on its own.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "anvil/kernels/cpu/exp_sums_internal.h"

namespace anvil::kernels::ref {

namespace exp_detail {

inline uint64_t Bits(double x) { return std::bit_cast<uint64_t>(x); }
inline double FromBits(uint64_t u) { return std::bit_cast<double>(u); }

// 512 <= |x| < 1024: scale = 2^(k/128) (its bits sbits, with k's high bits
// added) may have over- or underflowed its exponent; rebuild it 2^1009 or
// 2^-1022 off and scale the result back, rounding subnormal results once.
inline double ExpOutsideScale(double tmp, uint64_t sbits, uint64_t ki) {
  if ((ki & 0x80000000u) == 0) {  // k > 0
    const double scale = FromBits(sbits - (uint64_t{1009} << 52));
    return 0x1p1009 * std::fma(scale, tmp, scale);
  }
  const double scale = FromBits(sbits + (uint64_t{1022} << 52));
  const double scaled_tmp = scale * tmp;
  double y = scale + scaled_tmp;
  if (y < 1.0) {
    // y's rounding error, carried so that the final scaling into the
    // subnormal range rounds only once.
    double lo = (scale - y) + scaled_tmp;
    const double hi = 1.0 + y;
    lo = ((1.0 - hi) + y) + lo;
    y = (hi + lo) - 1.0;
    if (y == 0.0) y = 0.0;  // never -0
  }
  return 0x1p-1022 * y;
}

}  // namespace exp_detail

inline double ExpF64(double x) {
  using namespace exp_sums_internal;
  using namespace exp_detail;
  const uint64_t top = (Bits(x) >> 52) & 0x7ff;
  bool outside_scale = false;
  if (top < kTinyTop) return 1.0 + x;  // |x| < 2^-54, 0 and subnormals included
  if (top >= kBigTop) {
    if (top > kBigTop) {  // |x| >= 1024, inf or NaN
      if (x == -std::numeric_limits<double>::infinity()) return 0.0;
      if (top == 0x7ff) return 1.0 + x;  // +inf, NaN
      return x < 0 ? 0.0 : std::numeric_limits<double>::infinity();
    }
    outside_scale = true;
  }
  // k = rint(x 128/ln2) in the low bits of kd's mantissa; r = x - k ln2/128.
  double kd = std::fma(x, kInvLn2N, kShift);
  const uint64_t ki = Bits(kd);
  kd -= kShift;
  double r = std::fma(kd, kNegLn2HiN, x);
  r = std::fma(kd, kNegLn2LoN, r);
  const uint64_t index = 2 * (ki % (1 << kTableBits));
  const double tail = FromBits(kTable[index]);
  const uint64_t sbits = kTable[index + 1] + (ki << (52 - kTableBits));
  // e^x ~= scale (1 + tmp), tmp = tail + (e^r - 1).
  const double r2 = r * r;
  const double p23 = std::fma(r, kC3, kC2);
  const double p45 = std::fma(r, kC5, kC4);
  double tmp = std::fma(p23, r2, r + tail);
  tmp = std::fma(r2 * r2, p45, tmp);
  if (outside_scale) return ExpOutsideScale(tmp, sbits, ki);
  const double scale = FromBits(sbits);
  return std::fma(scale, tmp, scale);
}

inline void ExpRunningSums(int64_t n, const float* x, double scale, double shift, double* weights,
                           double* sums) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    weights[i] = ExpF64(std::fma(static_cast<double>(x[i]), scale, -shift));
    sum += weights[i];
    sums[i] = sum;
  }
}

inline int64_t FirstMaxIndex(int64_t n, const float* x) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace anvil::kernels::ref
