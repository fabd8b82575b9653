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

// A vector count as a type, so each count's loops keep their sums in registers.
template <int N>
struct Count {
  static constexpr int kValue = N;
};
// f(Count<n>{}) for n in 1..4.
template <class F>
void WithCount(int n, F&& f) {
  switch (n) {
    case 1:
      f(Count<1>{});
      break;
    case 2:
      f(Count<2>{});
      break;
    case 3:
      f(Count<3>{});
      break;
    default:
      f(Count<4>{});
      break;
  }
}

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

// p[r][c] for R rows and the NV vectors of keys from c0: each lane one chain
// of FMAs over d from 0, the keys' vector (kt = K^T, [HD][kBc], f32 or bf16
// widened) loaded once for all R rows. q: [R][HD]; p: [R][kBc].
template <class V, int R, int NV, class KT>
void ScoreKeys(int hd, const KT* kt, const float* q, int c0, float* p) {
  constexpr int W = V::kLanes;
  V acc[R][NV];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) acc[r][j] = V::Zero();
  }
  for (int d = 0; d < hd; ++d) {
    V k[NV];
    for (int j = 0; j < NV; ++j) k[j] = V::Load(kt + d * attention_internal::kBc + c0 + j * W);
    for (int r = 0; r < R; ++r) {
      const V qd = V::Set(q[r * hd + d]);
      for (int j = 0; j < NV; ++j) acc[r][j] = MulAdd(k[j], qd, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) acc[r][j].Store(p + r * attention_internal::kBc + c0 + j * W);
  }
}

// o[r][d0..] = o * alpha[r], then fma(V[c][d], p[r][c], o) over c < nc in
// order, for NV vectors of HD from d0; each value vector (vb: rows at stride
// vs, f32 or bf16 widened) loaded once for all R rows.
template <class V, int R, int NV, class VT>
void AccumulateValues(int hd, int nc, const VT* vb, int64_t vs, const float* p, const float* alpha,
                      int d0, float* o) {
  constexpr int W = V::kLanes;
  V acc[R][NV];
  for (int r = 0; r < R; ++r) {
    const V va = V::Set(alpha[r]);
    for (int j = 0; j < NV; ++j) acc[r][j] = V::Load(o + r * hd + d0 + j * W) * va;
  }
  for (int c = 0; c < nc; ++c) {
    V v[NV];
    for (int j = 0; j < NV; ++j) v[j] = V::Load(vb + c * vs + d0 + j * W);
    for (int r = 0; r < R; ++r) {
      const V pc = V::Set(p[r * attention_internal::kBc + c]);
      for (int j = 0; j < NV; ++j) acc[r][j] = MulAdd(v[j], pc, acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < NV; ++j) acc[r][j].Store(o + r * hd + d0 + j * W);
  }
}

// R rows at one position against the first `nc` keys of a block: kt = K^T
// ([HD][kBc]), vb = V rows (row stride vs); KT, VT: float or BF16. q = q'
// ([R][HD]), o = O ([R][HD]); p: [R][kBc] scratch; m, l: the rows' state.
template <class V, int R, class KT, class VT>
void DecodeRowsBlock(int hd, int nc, const KT* kt, const VT* vb, int64_t vs, const float* q,
                     float* o, float* p, float* m, float* l) {
  constexpr int W = V::kLanes;
  constexpr int kChunk = 4;  // vectors of keys (or of HD) a pass: 4 R independent FMA chains
  for (int c0 = 0; c0 < nc; c0 += kChunk * W) {
    WithCount(MinI(kChunk, (nc - c0 + W - 1) / W),
              [&](auto n) { ScoreKeys<V, R, decltype(n)::kValue>(hd, kt, q, c0, p); });
  }
  float alpha[R];
  for (int r = 0; r < R; ++r) {
    float* pr = p + r * attention_internal::kBc;
    float mb = -INFINITY;
    for (int c = 0; c < nc; ++c) mb = Max(F32x1{mb}, F32x1{pr[c]}).v;
    const float mo = m[r];
    const float mn = Max(F32x1{mo}, F32x1{mb}).v;
    alpha[r] = Exp2(F32x1{mo - mn}).v;
    m[r] = mn;
    const V vmn = V::Set(mn);
    for (int c0 = 0; c0 < nc; c0 += W) Exp2(V::Load(pr + c0) - vmn).Store(pr + c0);
    float sum = 0.0f;
    for (int c = 0; c < nc; ++c) sum = sum + pr[c];
    l[r] = MulAdd(F32x1{l[r]}, F32x1{alpha[r]}, F32x1{sum}).v;
  }
  for (int d0 = 0; d0 < hd; d0 += kChunk * W) {
    WithCount(MinI(kChunk, (hd - d0) / W), [&](auto n) {
      AccumulateValues<V, R, decltype(n)::kValue>(hd, nc, vb, vs, p, alpha, d0, o);
    });
  }
}

// DecodeRowsBlock with the operands' element types resolved.
template <class V, int R>
void DecodeRowsBlockOf(int hd, int nc, const void* kt, bool k_bf16, const void* vb, bool v_bf16,
                       int64_t vs, const float* q, float* o, float* p, float* m, float* l) {
  auto with_v = [&](const auto* k) {
    if (v_bf16) {
      DecodeRowsBlock<V, R>(hd, nc, k, static_cast<const BF16*>(vb), vs, q, o, p, m, l);
    } else {
      DecodeRowsBlock<V, R>(hd, nc, k, static_cast<const float*>(vb), vs, q, o, p, m, l);
    }
  };
  if (k_bf16) {
    with_v(static_cast<const BF16*>(kt));
  } else {
    with_v(static_cast<const float*>(kt));
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
// Two consecutive rows at one position (a GQA group's heads) go together:
// each K and V vector is loaded (and widened) once for both, and their
// chains interleave. Head blocks are read in place; keys given as rows are
// staged and transposed per block.
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
      PrefetchRows(t.k, t.in_bf16, start + kBc, next, hd, true);
      PrefetchRows(t.v, t.in_bf16, start + kBc, next, hd, false);
    }
    const void* kt = BlockBase(t.k, t.in_bf16, start);
    bool k_bf16 = t.in_bf16;
    if (!t.k.head_blocks) {  // K^T: staged rows, then W x W transposes
      const int ncp = (nc + W - 1) / W * W;
      StageRows<V>(t.k, t.in_bf16, start, nc, ncp, hd, sc.kf);
      for (int c0 = 0; c0 < ncp; c0 += W) {
        for (int d0 = 0; d0 < hd; d0 += W) {
          TransposeBlock(V{}, sc.kf + c0 * hd + d0, hd, sc.kt + d0 * kBc + c0, kBc);
        }
      }
      kt = sc.kt;
      k_bf16 = false;
    }
    const void* vb = BlockBase(t.v, t.in_bf16, start);
    const int64_t vs = t.v.head_blocks ? hd : t.v.stride;
    for (int r = 0; r < rows;) {
      const int64_t pos = static_cast<int64_t>(t.pos[r]);
      const int pair = r + 1 < rows && t.pos[r + 1] == t.pos[r] ? 2 : 1;
      if (start <= pos) {
        const int visible = static_cast<int>(MinI(int64_t{nc}, pos - start + 1));
        auto run = pair == 2 ? DecodeRowsBlockOf<V, 2> : DecodeRowsBlockOf<V, 1>;
        run(hd, visible, kt, k_bf16, vb, t.in_bf16, vs, sc.q + r * hd, sc.o + r * hd, sc.p, &m[r],
            &l[r]);
      }
      r += pair;
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
