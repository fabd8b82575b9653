// Scalar oracle for GemmFp8 (gemm.h), in double: every element decoded with
// core's exact conversions (times its E8M0 factor for MX), each K block's
// product sum times the blocks' factors, summed. It fixes no rounding order;
// the test bounds the fast path's distance to it.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "anvil/core/convert.h"
#include "anvil/kernels/gemm.h"

namespace anvil::kernels::ref {

inline double Fp8Decode(const Fp8Operand& o, int64_t row, int64_t k, int64_t k_total, uint8_t q) {
  double v = o.format == Fp8Format::kE4M3 ? E4M3ToF32(q) : E5M2ToF32(q);
  if (o.scaling == Fp8Scaling::kMx) {
    const int64_t blocks = (k_total + o.block - 1) / o.block;
    v *= E8M0ToF32(o.e8m0[row * blocks + k / o.block]);
  }
  return v;
}

// The factor of stored row `row` of K block `kb` (blocks of `s` along K).
inline double Fp8Factor(const Fp8Operand& o, bool stored_k_major, int64_t row, int64_t kb,
                        int64_t rows_total, int64_t k_total) {
  switch (o.scaling) {
    case Fp8Scaling::kTensor:
      return o.scale;
    case Fp8Scaling::kMx:
      return 1.0;
    case Fp8Scaling::kRowBlocks:
      return o.scales[row * ((k_total + o.block - 1) / o.block) + kb];
    case Fp8Scaling::kTiles: {
      const int64_t tk = (k_total + o.block - 1) / o.block,
                    tr = (rows_total + o.block - 1) / o.block;
      return stored_k_major ? o.scales[kb * tr + row / o.block]
                            : o.scales[(row / o.block) * tk + kb];
    }
  }
  return 1.0;
}

// C[m, n] = [C +] sum over K blocks of length s of (factor_a * factor_b *
// sum_k a * b), in double; A stored [m, k]; B stored [k, n] or [n, k] (trans_b).
inline std::vector<double> GemmFp8(int64_t m, int64_t n, int64_t k, bool trans_b,
                                   const Fp8Operand& a, const Fp8Operand& b, int64_t s,
                                   const std::vector<double>* c0 = nullptr) {
  std::vector<double> c(m * n, 0.0);
  if (c0 != nullptr) c = *c0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p0 = 0, kb = 0; p0 < k; p0 += s, ++kb) {
        double block = 0;
        for (int64_t p = p0; p < p0 + s && p < k; ++p) {
          const uint8_t qb = trans_b ? b.data[j * k + p] : b.data[p * n + j];
          block += Fp8Decode(a, i, p, k, a.data[i * k + p]) * Fp8Decode(b, j, p, k, qb);
        }
        c[i * n + j] +=
            block * Fp8Factor(a, false, i, kb, m, k) * Fp8Factor(b, !trans_b, j, kb, n, k);
      }
    }
  }
  return c;
}

}  // namespace anvil::kernels::ref
