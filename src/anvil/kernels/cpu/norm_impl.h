// RMSNorm row kernels, written once over the vector type V (simd.h) and
// instantiated per tier by norm.cc (F32x1), norm_avx2.cc and norm_avx512.cc.
// Each function covers a range of rows (or, for backward's dweight, a step
// of columns of a block of rows) that the dispatcher in norm.cc hands to one
// thread; nothing here checks or allocates.
#pragma once

#include <cstdint>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::norm_internal {

template <typename T>
struct Args {
  int64_t dim;
  const T* x;
  const float* weight;
  float eps;
  T* y;            // forward
  float* rstd;     // forward output (may be null) / backward input
  const T* dy;     // backward
  T* dx;           // backward
  float* dweight;  // backward
  // Ask for the next row ahead (forward): set where the inputs outgrow the
  // L2s, whose cached rows would only pay for the asks.
  bool prefetch;
};

// Backward's dweight pass over one step, columns [col_begin, col_end) of a
// block of rows [row_begin, row_end); acc[0, dim) holds the running sums
// that the blocks of rows hand on to one another in row order.
struct StepRange {
  int64_t row_begin, row_end, col_begin, col_end;
  float* acc;
  bool first, last;  // the first / last block of rows
};

struct Kernels {
  void (*forward_f32)(const Args<float>&, int64_t row_begin, int64_t row_end);
  void (*forward_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end);
  void (*backward_row_scales_f32)(const Args<float>&, int64_t row_begin, int64_t row_end,
                                  float* row_scales);
  void (*backward_row_scales_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end,
                                   float* row_scales);
  void (*backward_dweight_step_f32)(const Args<float>&, const StepRange&);
  void (*backward_dweight_step_bf16)(const Args<BF16>&, const StepRange&);
  void (*backward_dx_f32)(const Args<float>&, int64_t row_begin, int64_t row_end,
                          const float* row_scales);
  void (*backward_dx_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end,
                           const float* row_scales);
};

const Kernels& ScalarKernels();  // norm.cc
const Kernels& Avx2Kernels();    // norm_avx2.cc
const Kernels& Avx512Kernels();  // norm_avx512.cc

}  // namespace anvil::kernels::norm_internal

namespace anvil::kernels::ANVIL_SIMD_NS::norm {

using norm_internal::Args;

// sum_c a[c] * b[c] over one row: four accumulators over whole groups of four
// vectors, then whole vectors into the first, the partial tail into the
// second, combined as (a0 + a1) + (a2 + a3) and reduced by ReduceSum's tree.
template <typename V, typename Load>
float RowDot(int64_t n, Load load) {
  constexpr int64_t L = V::kLanes;
  V a0 = V::Zero(), a1 = V::Zero(), a2 = V::Zero(), a3 = V::Zero();
  int64_t c = 0;
  for (; c + 4 * L <= n; c += 4 * L) {
    a0 = load(c, L, a0);
    a1 = load(c + L, L, a1);
    a2 = load(c + 2 * L, L, a2);
    a3 = load(c + 3 * L, L, a3);
  }
  for (; c + L <= n; c += L) a0 = load(c, L, a0);
  if (c < n) a1 = load(c, n - c, a1);
  return ReduceSum((a0 + a1) + (a2 + a3));
}

template <typename V, typename T>
void Forward(const Args<T>& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t L = V::kLanes;
  const int64_t dim = a.dim;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* x = a.x + r * dim;
    T* y = a.y + r * dim;
    const float ss = RowDot<V>(dim, [&](int64_t c, int64_t n, V acc) {
      const V v = n == L ? V::Load(x + c) : V::LoadN(x + c, static_cast<int>(n));
      return MulAdd(v, v, acc);
    });
    const float rs = 1.0f / __builtin_sqrtf(ss / static_cast<float>(dim) + a.eps);
    if (a.rstd != nullptr) a.rstd[r] = rs;
    const V vrs = V::Set(rs);
    const auto scale = [&](int64_t c) {
      (V::Load(x + c) * vrs * V::Load(a.weight + c)).Store(y + c);
    };
    int64_t c = 0;
    if (L > 1 && a.prefetch) {
      // The next row on its way while this one is scaled (from DRAM, 2
      // threads: f32 1.3x, bf16 1.5x). A loop of its own: the test inside
      // costs cached rows 5-10%.
      for (; c + L <= dim; c += L) {
        PrefetchL2(x + dim + c, L * sizeof(T));
        scale(c);
      }
    } else {
      for (; c + L <= dim; c += L) scale(c);
    }
    if (c < dim) {
      const int n = static_cast<int>(dim - c);
      (V::LoadN(x + c, n) * vrs * V::LoadN(a.weight + c, n)).StoreN(y + c, n);
    }
  }
}

// Backward's first pass over a block of rows: per row, the dx formula's
// scale k = (s / dim) * rstd^3 with s = sum_c (w dy) x, into
// row_scales[r - row_begin].
// It reads the block's x and dy from DRAM into the thread's L2, where the
// dweight and dx passes find them.
template <typename V, typename T>
void BackwardRowScales(const Args<T>& a, int64_t row_begin, int64_t row_end, float* row_scales) {
  constexpr int64_t L = V::kLanes;
  const int64_t dim = a.dim;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* x = a.x + r * dim;
    const T* dy = a.dy + r * dim;
    const float s = RowDot<V>(dim, [&](int64_t c, int64_t n, V acc) {
      if (n == L) return MulAdd(V::Load(a.weight + c) * V::Load(dy + c), V::Load(x + c), acc);
      const int m = static_cast<int>(n);
      return MulAdd(V::LoadN(a.weight + c, m) * V::LoadN(dy + c, m), V::LoadN(x + c, m), acc);
    });
    const float rs = a.rstd[r];
    row_scales[r - row_begin] = (s / static_cast<float>(dim)) * (rs * rs * rs);
  }
}

// Backward's dweight over one step: columns [col_begin, col_end) of a block
// of rows, rows in order and each row's columns in order:
//   acc += (dy * x) * rstd  (one fma),
// acc starting from 0 on the first block of rows and added to dweight after
// the last (else left in step.acc for the next block). Row by row, not
// column by column with the sums in registers: a column walk down the rows
// leads the stride prefetcher on into the next block's rows, which another
// core is working on (measured: that core's pass ran 1.6x slower). Lanes
// never mix, so a column's bits depend on neither the steps nor the blocks.
template <typename V, typename T>
void BackwardDweightStep(const Args<T>& a, const norm_internal::StepRange& step) {
  constexpr int64_t L = V::kLanes;
  const int64_t c0 = step.col_begin, n = step.col_end - c0;
  float* acc = step.acc + c0;
  if (step.first) {
    for (int64_t c = 0; c < n; ++c) acc[c] = 0.0f;
  }
  for (int64_t r = step.row_begin; r < step.row_end; ++r) {
    const T* x = a.x + r * a.dim + c0;
    const T* dy = a.dy + r * a.dim + c0;
    const V rs = V::Set(a.rstd[r]);
    int64_t c = 0;
    for (; c + L <= n; c += L) {
      MulAdd(V::Load(dy + c) * V::Load(x + c), rs, V::Load(acc + c)).Store(acc + c);
    }
    if (c < n) {
      const int m = static_cast<int>(n - c);
      MulAdd(V::LoadN(dy + c, m) * V::LoadN(x + c, m), rs, V::LoadN(acc + c, m)).StoreN(acc + c, m);
    }
  }
  if (step.last) {
    float* dw = a.dweight + c0;
    int64_t c = 0;
    for (; c + L <= n; c += L) (V::Load(dw + c) + V::Load(acc + c)).Store(dw + c);
    if (c < n) {
      const int m = static_cast<int>(n - c);
      (V::LoadN(dw + c, m) + V::LoadN(acc + c, m)).StoreN(dw + c, m);
    }
  }
}

// Backward's last pass over a block of rows, after its dweight (dx may
// alias dy): dx = rstd * (w dy) - k x, with k the row's scale from
// BackwardRowScales.
template <typename V, typename T>
void BackwardDx(const Args<T>& a, int64_t row_begin, int64_t row_end, const float* row_scales) {
  constexpr int64_t L = V::kLanes;
  const int64_t dim = a.dim;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* x = a.x + r * dim;
    const T* dy = a.dy + r * dim;
    T* dx = a.dx + r * dim;
    const V vrs = V::Set(a.rstd[r]);
    const V vk = V::Set(row_scales[r - row_begin]);
    int64_t c = 0;
    for (; c + L <= dim; c += L) {
      const V g = V::Load(a.weight + c) * V::Load(dy + c);
      NegMulAdd(vk, V::Load(x + c), vrs * g).Store(dx + c);
    }
    if (c < dim) {
      const int n = static_cast<int>(dim - c);
      const V g = V::LoadN(a.weight + c, n) * V::LoadN(dy + c, n);
      NegMulAdd(vk, V::LoadN(x + c, n), vrs * g).StoreN(dx + c, n);
    }
  }
}

template <typename V>
constexpr norm_internal::Kernels MakeKernels() {
  return {Forward<V, float>,
          Forward<V, BF16>,
          BackwardRowScales<V, float>,
          BackwardRowScales<V, BF16>,
          BackwardDweightStep<V, float>,
          BackwardDweightStep<V, BF16>,
          BackwardDx<V, float>,
          BackwardDx<V, BF16>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::norm
