// Portable GEMM tier: one row at a time over 64-column strips, in the fixed
// order of gemm.h (K blocks of 256 from zero, increasing k, one fused
// multiply-add each; block sums in order). Built at the baseline ISA; slow but
// exact in its rounding on any CPU (fmaf is correctly rounded everywhere).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "anvil/kernels/cpu/gemm_fp8.h"
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal {
namespace {

constexpr int64_t kStrip = kScalar.nr;
constexpr int64_t kKc = kScalar.kc;

float Widen(float x) { return x; }
float Widen(BF16 x) { return ToFloat(x); }

// C's element at `at` as f32, and w results stored from `at` (bf16: rounded once).
float LoadC(const Problem& p, int64_t at) {
  return p.bf16_out ? ToFloat(static_cast<const BF16*>(p.c)[at])
                    : static_cast<const float*>(p.c)[at];
}
void StoreC(const Problem& p, int64_t at, int64_t w, const float* run) {
  for (int64_t j = 0; j < w; ++j) {
    if (p.bf16_out) {
      static_cast<BF16*>(p.c)[at + j] = ToBF16(run[j]);
    } else {
      static_cast<float*>(p.c)[at + j] = run[j];
    }
  }
}

template <typename T>
void Rows(const Problem& p, const Region& r) {
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  // Element strides: A(i, k) = a[i*ai + k*ak], B(k, j) = b[k*bk + j*bj].
  const int64_t ai = p.trans_a ? 1 : p.lda, ak = p.trans_a ? p.lda : 1;
  const int64_t bk = p.trans_b ? 1 : p.ldb, bj = p.trans_b ? p.ldb : 1;
  float run[kStrip];
  float acc[kStrip];
  for (int64_t i = r.m0; i < r.m1; ++i) {
    for (int64_t j0 = r.n0; j0 < r.n1; j0 += kStrip) {
      const int64_t w = std::min(kStrip, r.n1 - j0);
      for (int64_t pc = 0; pc < p.k; pc += kKc) {
        const int64_t kend = std::min(pc + kKc, p.k);
        std::memset(acc, 0, sizeof(acc));
        for (int64_t k = pc; k < kend; ++k) {
          const float av = Widen(a[i * ai + k * ak]);
          const T* brow = b + k * bk + j0 * bj;
          for (int64_t j = 0; j < w; ++j) acc[j] = std::fma(av, Widen(brow[j * bj]), acc[j]);
        }
        for (int64_t j = 0; j < w; ++j) {
          if (pc > 0) {
            run[j] += acc[j];
          } else if (p.accumulate) {
            run[j] = LoadC(p, i * p.ldc + j0 + j) + acc[j];
          } else {
            run[j] = acc[j];
          }
        }
      }
      StoreC(p, i * p.ldc + j0, w, run);
    }
  }
}

// GemmFp8 on this tier: the decoded values in f32 (gemm_fp8.h's Value), K
// blocks of fp8->kblock, the same per-block update as the packed driver.
struct ScalarTier {
  static constexpr int64_t kNr = kStrip;
};

void Fp8Rows(const Problem& p, const Region& r) {
  using Pack = Fp8Pack<ScalarTier>;
  const Fp8Problem& f = *p.fp8;
  const auto* a = static_cast<const uint8_t*>(p.a);
  const auto* b = static_cast<const uint8_t*>(p.b);
  const int64_t bk = p.trans_b ? 1 : p.ldb, bj = p.trans_b ? p.ldb : 1;
  const int64_t kc = f.kblock;
  float run[kStrip];
  float acc[kStrip];
  for (int64_t i = r.m0; i < r.m1; ++i) {
    for (int64_t j0 = r.n0; j0 < r.n1; j0 += kStrip) {
      const int64_t w = std::min(kStrip, r.n1 - j0);
      for (int64_t pc = 0; pc < p.k; pc += kc) {
        const int64_t kend = std::min(pc + kc, p.k);
        std::memset(acc, 0, sizeof(acc));
        for (int64_t k = pc; k < kend; ++k) {
          const float av = Pack::Value(f.a, f.value_a, a[i * p.lda + k], i, k, p.k);
          for (int64_t j = 0; j < w; ++j) {
            const int64_t col = j0 + j;
            const float bv = Pack::Value(f.b, f.value_b, b[k * bk + col * bj], col, k, p.k);
            acc[j] = std::fma(av, bv, acc[j]);
          }
        }
        const bool first = pc == 0 && !p.accumulate;
        const float sa = f.block_scaled ? Pack::Factor(f.a, false, i, pc / kc, p.m, p.k) : 1.0f;
        for (int64_t j = 0; j < w; ++j) {
          const float s =
              f.block_scaled ? sa * Pack::Factor(f.b, !p.trans_b, j0 + j, pc / kc, p.n, p.k) : 1.0f;
          if (pc == 0 && p.accumulate) run[j] = LoadC(p, i * p.ldc + j0 + j);
          if (!f.block_scaled) {
            run[j] = first ? acc[j] : run[j] + acc[j];
          } else {
            run[j] = first ? acc[j] * s : std::fma(acc[j], s, run[j]);
          }
        }
      }
      StoreC(p, i * p.ldc + j0, w, run);
    }
  }
}

}  // namespace

void GemmRegionScalar(const Problem& p, const Region& r, std::byte*, size_t) {
  if (p.fp8 != nullptr) {
    Fp8Rows(p, r);
  } else if (p.bf16_in) {
    Rows<BF16>(p, r);
  } else {
    Rows<float>(p, r);
  }
}

}  // namespace anvil::kernels::gemm_internal
