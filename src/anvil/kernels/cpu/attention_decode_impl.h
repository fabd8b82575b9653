// Decode tiles of a few query rows (a generated token, or a small GQA group):
// ForwardTile's per-row f32 chain with whole vectors along keys and HD, so
// decode stays bitwise equal to the training forward. Compile -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/kernels/cpu/attention_impl.h"

namespace anvil::kernels::ANVIL_SIMD_NS::attention {

using attention_internal::DecodeScratch;
using attention_internal::kDecodeRows;

// A local min: nothing inline from other headers in an ISA unit (simd.h).
inline int64_t MinI(int64_t a, int64_t b) { return a < b ? a : b; }
inline int MinI(int a, int b) { return a < b ? a : b; }

// kf[r][d] = row start + r of `src` as f32, r < n; rows n..padded-1 are 0.
template <class V>
void StageRows(const attention_internal::Rows& src, bool bf16, int64_t start, int n, int padded,
               int hd, float* kf) {
  const char* base = BlockBase(src, bf16, start);
  for (int r = 0; r < padded; ++r) {
    const void* row = r < n ? base + r * src.stride * (bf16 ? 2 : 4) : nullptr;
    for (int d = 0; d < hd; d += V::kLanes) {
      (r < n ? LoadRow<V>(row, bf16, d) : V::Zero()).Store(kf + r * hd + d);
    }
  }
}

// One row against the first `nc` keys of a block: kt = K^T ([HD][kBc]),
// vb = V rows (row stride vs), q = q' (HD), o = O (HD); p: [kBc] scratch.
template <class V>
void DecodeRowBlock(int hd, int nc, const float* kt, const float* vb, int64_t vs, const float* q,
                    float* o, float* p, float* m, float* l) {
  constexpr int W = V::kLanes;
  constexpr int kChains = 4;  // independent FMA chains: one per vector of keys
  for (int c0 = 0; c0 < nc; c0 += kChains * W) {
    const int nv = MinI(kChains, (nc - c0 + W - 1) / W);
    V acc[kChains] = {V::Zero(), V::Zero(), V::Zero(), V::Zero()};
    for (int d = 0; d < hd; ++d) {
      const V qd = V::Set(q[d]);
      const float* krow = kt + d * attention_internal::kBc + c0;
      for (int j = 0; j < nv; ++j) acc[j] = MulAdd(V::Load(krow + j * W), qd, acc[j]);
    }
    for (int j = 0; j < nv; ++j) acc[j].Store(p + c0 + j * W);
  }
  float mb = -INFINITY;
  for (int c = 0; c < nc; ++c) mb = Max(F32x1{mb}, F32x1{p[c]}).v;
  const float mo = *m;
  const float mn = Max(F32x1{mo}, F32x1{mb}).v;
  const float alpha = Exp2(F32x1{mo - mn}).v;
  *m = mn;
  const V vmn = V::Set(mn);
  for (int c0 = 0; c0 < nc; c0 += W) Exp2(V::Load(p + c0) - vmn).Store(p + c0);
  float sum = 0.0f;
  for (int c = 0; c < nc; ++c) sum = sum + p[c];
  *l = MulAdd(F32x1{*l}, F32x1{alpha}, F32x1{sum}).v;

  const V va = V::Set(alpha);
  for (int d0 = 0; d0 < hd; d0 += kChains * W) {
    const int nv = MinI(kChains, (hd - d0) / W);
    V acc[kChains];
    for (int j = 0; j < nv; ++j) acc[j] = V::Load(o + d0 + j * W) * va;
    for (int c = 0; c < nc; ++c) {
      const V pc = V::Set(p[c]);
      const float* vrow = vb + c * vs + d0;
      for (int j = 0; j < nv; ++j) acc[j] = MulAdd(V::Load(vrow + j * W), pc, acc[j]);
    }
    for (int j = 0; j < nv; ++j) acc[j].Store(o + d0 + j * W);
  }
}

// A tile of t.lanes <= kDecodeRows rows (FwdTile as for ForwardTile; causal).
// Per row and KV block [start, start + nc), over the keys c < visible it sees:
//   q'   = q * qscale                                  (one rounding each)
//   S[c] = fma(K[c][d], q'[d], ...) over d = 0..HD-1 in order, from 0
//   mb   = Max(...Max(Max(-inf, S[0]), S[1])..., S[last])   (c order, x86 rule)
//   m'   = Max(m, mb), alpha = 2^(m - m'), P[c] = 2^(S[c] - m')
//   l    = fma(l, alpha, ((0 + P[0]) + P[1]) + ...)
//   O[d] = O[d] * alpha, then O[d] = fma(V[c][d], P[c], O[d]) for c in order
//   out  = O / l, lse = (m + log2 l) ln 2
// — ForwardTile's operations in its order. ForwardTile also walks keys a row
// may not see (masked to -inf: Max keeps mb, P = +0 adds nothing, the P·V
// term is skipped) and blocks past the row (alpha = 1: a no-op); while the
// scores are finite, both leave every bit as skipping them here does.
template <class V>
void DecodeTile(const FwdTile& t, const DecodeScratch& sc) {
  constexpr int W = V::kLanes;
  constexpr int64_t kBc = attention_internal::kBc;
  const int hd = t.head_dim;
  const int rows = t.lanes;
  float m[kDecodeRows];
  float l[kDecodeRows];
  float max_pos = 0;
  const V qs = V::Set(t.qscale);
  for (int r = 0; r < rows; ++r) {
    for (int d = 0; d < hd; d += W) {
      (LoadRow<V>(t.q[r], t.in_bf16, d) * qs).Store(sc.q + r * hd + d);
      V::Zero().Store(sc.o + r * hd + d);
    }
    m[r] = -INFINITY;
    l[r] = 0.0f;
    max_pos = t.pos[r] > max_pos ? t.pos[r] : max_pos;
  }

  const int64_t last = static_cast<int64_t>(max_pos);
  for (int64_t start = 0; start <= last; start += kBc) {
    const int nc = static_cast<int>(MinI(kBc, t.kv_len - start));
    if (start + kBc <= last) {
      const int next = static_cast<int>(MinI(kBc, t.kv_len - start - kBc));
      PrefetchRows(t.k, t.in_bf16, start + kBc, next, hd);
      PrefetchRows(t.v, t.in_bf16, start + kBc, next, hd);
    }
    // K^T for the block, shared by the rows: staged rows, then W x W transposes.
    const int ncp = (nc + W - 1) / W * W;
    StageRows<V>(t.k, t.in_bf16, start, nc, ncp, hd, sc.kf);
    for (int c0 = 0; c0 < ncp; c0 += W) {
      for (int d0 = 0; d0 < hd; d0 += W) {
        TransposeBlock(V{}, sc.kf + c0 * hd + d0, hd, sc.kt + d0 * kBc + c0, kBc);
      }
    }
    int64_t vs = 0;
    const float* vb = F32Rows<V>(t.v, t.in_bf16, start, nc, hd, sc.vf, &vs);
    for (int r = 0; r < rows; ++r) {
      const int64_t pos = static_cast<int64_t>(t.pos[r]);
      if (start > pos) continue;
      const int visible = static_cast<int>(MinI(int64_t{nc}, pos - start + 1));
      DecodeRowBlock<V>(hd, visible, sc.kt, vb, vs, sc.q + r * hd, sc.o + r * hd, sc.p, &m[r],
                        &l[r]);
    }
  }

  for (int r = 0; r < rows; ++r) {
    const V lr = V::Set(l[r]);
    for (int d = 0; d < hd; d += W) {
      const V x = V::Load(sc.o + r * hd + d) / lr;
      if (t.out_bf16) {
        x.Store(static_cast<BF16*>(t.out[r]) + d);
      } else {
        x.Store(static_cast<float*>(t.out[r]) + d);
      }
    }
    if (t.lse[r] != nullptr) {
      *t.lse[r] = static_cast<float>(static_cast<double>(m[r]) * kLn2 +
                                     std::log(static_cast<double>(l[r])));
    }
  }
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::attention
