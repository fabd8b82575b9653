// GEMM oracle: op(A)·op(B) (+ C) in double, straight from the definition, for
// f32 and bf16 inputs. Written for clarity, shares nothing with the fast path;
// also returns |C| + Σ_k |a_ik||b_kj|, the scale of the rounding error bound.
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/gemm.h"

namespace anvil::kernels::ref {

inline double ToDouble(float x) { return static_cast<double>(x); }
inline double ToDouble(BF16 x) { return static_cast<double>(ToFloat(x)); }

// op(A)[i, kk] and op(B)[kk, j] under the GemmArgs layout rules.
template <typename T>
double OpA(const GemmArgs& args, const T* a, int64_t i, int64_t kk) {
  const int64_t lda = args.lda != 0 ? args.lda : (args.trans_a == Trans::kN ? args.k : args.m);
  return ToDouble(args.trans_a == Trans::kN ? a[i * lda + kk] : a[kk * lda + i]);
}
template <typename T>
double OpB(const GemmArgs& args, const T* b, int64_t kk, int64_t j) {
  const int64_t ldb = args.ldb != 0 ? args.ldb : (args.trans_b == Trans::kN ? args.n : args.k);
  return ToDouble(args.trans_b == Trans::kN ? b[kk * ldb + j] : b[j * ldb + kk]);
}

// out[i*n + j] = (accumulate ? c_old[i*ldc + j] : 0) + Σ_kk op(A)[i,kk]·op(B)[kk,j]
// in double; magnitude (if not null) gets |c_old| + Σ |op(A)[i,kk]|·|op(B)[kk,j]|.
// Products of f32 or bf16 values are exact in double; the sum is rounded
// k times at 2^-53, far below any f32 tolerance.
template <typename T, typename TC>
void GemmRef(const GemmArgs& args, const T* a, const T* b, const TC* c_old, double* out,
             double* magnitude = nullptr) {
  const int64_t ldc = args.ldc != 0 ? args.ldc : args.n;
  for (int64_t i = 0; i < args.m; ++i) {
    for (int64_t j = 0; j < args.n; ++j) {
      double sum = 0;
      double mag = 0;
      if (args.accumulate) {
        sum = ToDouble(c_old[i * ldc + j]);
        mag = std::fabs(sum);
      }
      for (int64_t kk = 0; kk < args.k; ++kk) {
        const double p = OpA(args, a, i, kk) * OpB(args, b, kk, j);
        sum += p;
        mag += std::fabs(p);
      }
      out[i * args.n + j] = sum;
      if (magnitude != nullptr) magnitude[i * args.n + j] = mag;
    }
  }
}

}  // namespace anvil::kernels::ref
