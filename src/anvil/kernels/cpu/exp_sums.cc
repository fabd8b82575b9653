// ExpF64 and ExpRunningSums: argument checks and the tier dispatch; the
// portable tier is the scalar restatement in ref/exp_sums_ref.h.
#include "anvil/kernels/exp_sums.h"

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/exp_sums_internal.h"
#include "anvil/kernels/ref/exp_sums_ref.h"

namespace anvil::kernels {

double ExpF64(double x) { return ref::ExpF64(x); }

void ExpRunningSums(Isa isa, int64_t n, const float* x, double scale, double shift, double* weights,
                    double* sums) {
  CHECK_GE(n, 0) << "ExpRunningSums: n must be >= 0";
  CHECK(n == 0 || (x != nullptr && weights != nullptr && sums != nullptr))
      << "ExpRunningSums: x, weights and sums must be non-null";
  switch (isa) {
    case Isa::kAvx512:
      exp_sums_internal::ExpRunningSumsAvx512(n, x, scale, shift, weights, sums);
      return;
    case Isa::kAvx2:
      exp_sums_internal::ExpRunningSumsAvx2(n, x, scale, shift, weights, sums);
      return;
    case Isa::kScalar:
      break;
  }
  ref::ExpRunningSums(n, x, scale, shift, weights, sums);
}

int64_t FirstMaxIndex(Isa isa, int64_t n, const float* x) {
  CHECK(n >= 1 && x != nullptr) << "FirstMaxIndex: n must be >= 1 and x non-null";
  if (x[0] != x[0]) return 0;  // a NaN first: nothing is greater
  switch (isa) {
    case Isa::kAvx512:
      return exp_sums_internal::FirstMaxIndexAvx512(n, x);
    case Isa::kAvx2:
      return exp_sums_internal::FirstMaxIndexAvx2(n, x);
    case Isa::kScalar:
      break;
  }
  return ref::FirstMaxIndex(n, x);
}

}  // namespace anvil::kernels
