// Attention oracle: softmax(scale * q.k + mask) . v straight from the
// definition, one query row at a time, in double; backward by the textbook
// formulas (dS = P * (dP - sum_j P dP)). Written for clarity; shares nothing
// with the fast path but the API structs (attention.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "anvil/core/bf16.h"
#include "anvil/kernels/attention.h"

namespace anvil::kernels::ref {

namespace attention_detail {
inline double ToD(double x) { return x; }
inline double ToD(float x) { return static_cast<double>(x); }
inline double ToD(BF16 x) { return static_cast<double>(ToFloat(x)); }
}  // namespace attention_detail

// A [tokens, heads, HD] operand: element (t, h, d) at data[t*row_stride + h*hd + d].
template <typename T>
struct AttentionRefView {
  const T* data;
  int64_t row_stride;
  int hd;
  double At(int64_t t, int h, int d) const {
    return attention_detail::ToD(data[t * row_stride + static_cast<int64_t>(h) * hd + d]);
  }
};

// The softmax weights p[0..n) of query row i (sequence-relative) of head h in
// the sequence starting at token b of length len; n = visible keys.
template <typename T>
int AttentionRefWeights(const AttentionDims& dims, int64_t b, int64_t len, int64_t i, int h,
                        AttentionRefView<T> q, AttentionRefView<T> k, std::vector<double>& p,
                        double* lse) {
  const int kvh = h / (dims.num_heads / dims.num_kv_heads);
  const double scale = AttentionScale(dims);
  const int64_t n = dims.mask == AttentionMask::kCausal ? i + 1 : len;
  p.assign(n, 0.0);
  double m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    double dot = 0;
    for (int d = 0; d < dims.head_dim; ++d) dot += q.At(b + i, h, d) * k.At(b + j, kvh, d);
    p[j] = scale * dot;
    m = std::max(m, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - m);
    sum += p[j];
  }
  for (int64_t j = 0; j < n; ++j) p[j] /= sum;
  if (lse != nullptr) *lse = m + std::log(sum);
  return static_cast<int>(n);
}

// out [tokens, NH, HD] dense; lse [NH, tokens] (nullable).
template <typename T>
void AttentionForwardRef(const AttentionDims& dims, std::span<const int32_t> cu_seqlens,
                         AttentionRefView<T> q, AttentionRefView<T> k, AttentionRefView<T> v,
                         double* out, double* lse) {
  const int nh = dims.num_heads;
  const int hd = dims.head_dim;
  const int kvh_of = nh / dims.num_kv_heads;
  const int64_t tokens = cu_seqlens.back();
  std::vector<double> p;
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const int64_t b = cu_seqlens[s];
    const int64_t len = cu_seqlens[s + 1] - b;
    for (int h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < len; ++i) {
        double row_lse = 0;
        const int n = AttentionRefWeights(dims, b, len, i, h, q, k, p, &row_lse);
        if (lse != nullptr) lse[h * tokens + b + i] = row_lse;
        for (int d = 0; d < hd; ++d) {
          double o = 0;
          for (int j = 0; j < n; ++j) o += p[j] * v.At(b + j, h / kvh_of, d);
          out[((b + i) * nh + h) * hd + d] = o;
        }
      }
    }
  }
}

// Gradients of sum(out * dout): dq [tokens, NH, HD], dk/dv [tokens, NKV, HD],
// dense, overwritten. dP = dO.v, dS = P (dP - sum_j P dP), dq = scale dS k,
// dk = scale dS^T q, dv = P^T dO.
template <typename T, typename G>
void AttentionBackwardRef(const AttentionDims& dims, std::span<const int32_t> cu_seqlens,
                          AttentionRefView<T> q, AttentionRefView<T> k, AttentionRefView<T> v,
                          AttentionRefView<G> dout, double* dq, double* dk, double* dv) {
  const int nh = dims.num_heads;
  const int nkv = dims.num_kv_heads;
  const int hd = dims.head_dim;
  const double scale = AttentionScale(dims);
  const int64_t tokens = cu_seqlens.back();
  std::fill(dk, dk + tokens * nkv * hd, 0.0);
  std::fill(dv, dv + tokens * nkv * hd, 0.0);
  std::vector<double> p, dp;
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    const int64_t b = cu_seqlens[s];
    const int64_t len = cu_seqlens[s + 1] - b;
    for (int h = 0; h < nh; ++h) {
      const int kvh = h / (nh / nkv);
      for (int64_t i = 0; i < len; ++i) {
        const int n = AttentionRefWeights(dims, b, len, i, h, q, k, p, nullptr);
        dp.assign(n, 0.0);
        double p_dot_dp = 0;
        for (int j = 0; j < n; ++j) {
          for (int d = 0; d < hd; ++d) dp[j] += dout.At(b + i, h, d) * v.At(b + j, kvh, d);
          p_dot_dp += p[j] * dp[j];
        }
        for (int d = 0; d < hd; ++d) dq[((b + i) * nh + h) * hd + d] = 0;
        for (int j = 0; j < n; ++j) {
          const double ds = p[j] * (dp[j] - p_dot_dp);
          for (int d = 0; d < hd; ++d) {
            dq[((b + i) * nh + h) * hd + d] += scale * ds * k.At(b + j, kvh, d);
            dk[((b + j) * nkv + kvh) * hd + d] += scale * ds * q.At(b + i, h, d);
            dv[((b + j) * nkv + kvh) * hd + d] += p[j] * dout.At(b + i, h, d);
          }
        }
      }
    }
  }
}

}  // namespace anvil::kernels::ref
