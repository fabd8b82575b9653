// RMSNorm row kernels, written once over the vector type V (simd.h) and
// instantiated per tier by norm.cc (F32x1), norm_avx2.cc and norm_avx512.cc.
// Each function covers a range of rows (or of columns, for dweight) that the
// dispatcher in norm.cc hands to one thread; nothing here checks or allocates.
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
  // Ask for the next row ahead (forward, and backward's dx pass): set where
  // the inputs outgrow the L2s, whose cached rows would only pay for the asks.
  bool prefetch;
};

// One thread's share of dweight for one block of rows: columns
// [col_begin, col_end), with running f32 sums acc[0, col_end - col_begin)
// carried from block to block (the thread's scratch).
struct DwRange {
  int64_t row_begin, row_end, col_begin, col_end;
  float* acc;
  bool first, last;  // the first / last block of rows
};

struct Kernels {
  // dweight's column granularity: threads get whole blocks of this many columns.
  int64_t dw_block_columns;
  void (*forward_f32)(const Args<float>&, int64_t row_begin, int64_t row_end);
  void (*forward_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end);
  void (*backward_dx_f32)(const Args<float>&, int64_t row_begin, int64_t row_end);
  void (*backward_dx_bf16)(const Args<BF16>&, int64_t row_begin, int64_t row_end);
  void (*backward_dw_f32)(const Args<float>&, const DwRange&);
  void (*backward_dw_bf16)(const Args<BF16>&, const DwRange&);
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

// dx = rstd * (w dy) - k x with k = (s / dim) * rstd^3, s = sum_c (w dy) x.
template <typename V, typename T>
void BackwardDx(const Args<T>& a, int64_t row_begin, int64_t row_end) {
  constexpr int64_t L = V::kLanes;
  const int64_t dim = a.dim;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* x = a.x + r * dim;
    const T* dy = a.dy + r * dim;
    T* dx = a.dx + r * dim;
    const float s = RowDot<V>(dim, [&](int64_t c, int64_t n, V acc) {
      if (n == L) return MulAdd(V::Load(a.weight + c) * V::Load(dy + c), V::Load(x + c), acc);
      const int k = static_cast<int>(n);
      return MulAdd(V::LoadN(a.weight + c, k) * V::LoadN(dy + c, k), V::LoadN(x + c, k), acc);
    });
    const float rs = a.rstd[r];
    const V vrs = V::Set(rs);
    const V vk = V::Set((s / static_cast<float>(dim)) * (rs * rs * rs));
    const auto step = [&](int64_t c) {
      const V g = V::Load(a.weight + c) * V::Load(dy + c);
      NegMulAdd(vk, V::Load(x + c), vrs * g).Store(dx + c);
    };
    int64_t c = 0;
    if (L > 1 && a.prefetch) {  // the next row, as in Forward
      for (; c + L <= dim; c += L) {
        PrefetchL2(x + dim + c, L * sizeof(T));
        PrefetchL2(dy + dim + c, L * sizeof(T));
        step(c);
      }
    } else {
      for (; c + L <= dim; c += L) step(c);
    }
    if (c < dim) {
      const int n = static_cast<int>(dim - c);
      const V g = V::LoadN(a.weight + c, n) * V::LoadN(dy + c, n);
      NegMulAdd(vk, V::LoadN(x + c, n), vrs * g).StoreN(dx + c, n);
    }
  }
}

// dweight is computed in blocks of kDwVectors vectors of columns, one
// accumulator register each (16 x 1 lane for the portable tier: a cache line).
template <typename V>
inline constexpr int kDwVectors = V::kLanes == 1 ? 16 : 8;

// For `nv` (<= kMaxNv) vectors of columns from c (the last `tail` lanes
// wide): acc[c..] += sum over rows [row_begin, row_end), in order, of
// (dy * x) * rstd, starting from 0 when `first`; when `last`, dweight += acc
// instead of saving acc. Lanes never mix, so a column's bits depend on
// neither the column blocking nor the row blocking.
template <typename V, typename T, int kMaxNv>
void DwBlock(const Args<T>& a, const norm_internal::DwRange& range, int64_t c, int nv, int tail) {
  constexpr int L = V::kLanes;
  float* acc_mem = range.acc + (c - range.col_begin);
  V acc[kMaxNv];
  for (int j = 0; j < nv; ++j) {
    const int n = j == nv - 1 ? tail : L;
    acc[j] = range.first ? V::Zero()
             : n == L    ? V::Load(acc_mem + j * L)
                         : V::LoadN(acc_mem + j * L, n);
  }
  for (int64_t r = range.row_begin; r < range.row_end; ++r) {
    const T* x = a.x + r * a.dim + c;
    const T* dy = a.dy + r * a.dim + c;
    const V rs = V::Set(a.rstd[r]);
    for (int j = 0; j < nv; ++j) {
      const int n = j == nv - 1 ? tail : L;
      const V p = n == L ? V::Load(dy + j * L) * V::Load(x + j * L)
                         : V::LoadN(dy + j * L, n) * V::LoadN(x + j * L, n);
      acc[j] = MulAdd(p, rs, acc[j]);
    }
  }
  for (int j = 0; j < nv; ++j) {
    const int n = j == nv - 1 ? tail : L;
    float* out = range.last ? a.dweight + c + j * L : acc_mem + j * L;
    const V v = range.last ? (n == L ? V::Load(out) : V::LoadN(out, n)) + acc[j] : acc[j];
    n == L ? v.Store(out) : v.StoreN(out, n);
  }
}

template <typename V, typename T>
void BackwardDw(const Args<T>& a, const norm_internal::DwRange& range) {
  constexpr int64_t L = V::kLanes;
  constexpr int kNv = kDwVectors<V>;
  int64_t c = range.col_begin;
  for (; c + kNv * L <= range.col_end; c += kNv * L) DwBlock<V, T, kNv>(a, range, c, kNv, L);
  if (c < range.col_end) {
    const int64_t n = range.col_end - c;
    const int nv = static_cast<int>((n + L - 1) / L);
    DwBlock<V, T, kNv>(a, range, c, nv, static_cast<int>(n - (nv - 1) * L));
  }
}

template <typename V>
constexpr norm_internal::Kernels MakeKernels() {
  return {kDwVectors<V> * V::kLanes, Forward<V, float>,    Forward<V, BF16>,   BackwardDx<V, float>,
          BackwardDx<V, BF16>,       BackwardDw<V, float>, BackwardDw<V, BF16>};
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::norm
