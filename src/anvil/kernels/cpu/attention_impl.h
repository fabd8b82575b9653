// FlashAttention-2 tiles, written once over simd.h's vector types V and
// instantiated per tier (F32x1 in attention_scalar.cc, F32x8 in attention_avx2.cc,
// F32x16 in attention_avx512.cc). Query rows are vector lanes and every lane's
// arithmetic is a fixed chain of f32 operations on that row's data alone, so a
// row gives the same bits in any tile, batch or thread split (attention.h).
// Include only from an attention TU compiled with -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstdint>

#include "anvil/kernels/cpu/attention_internal.h"
#include "anvil/kernels/cpu/attention_kernels.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::ANVIL_SIMD_NS::attention {

using attention_internal::BwdScratch;
using attention_internal::BwdUnit;
using attention_internal::FwdScratch;
using attention_internal::FwdTile;
using attention_internal::kBc;
using attention_internal::kBr;

// Lanes past the tile's rows: a position no key reaches, so never masked.
inline constexpr float kNoPos = 16777216.0f;  // 2^24
inline constexpr double kLn2 = 0.69314718055994530942;
inline constexpr double kLog2e = 1.44269504088896340736;

// The address of row `start` of `src` (the first of a key block: the rows
// after it, to the block's end, follow at src.stride, paged or not).
inline const char* BlockBase(const attention_internal::Rows& src, bool bf16, int64_t start) {
  const int64_t esize = bf16 ? 2 : 4;
  if (src.pages == nullptr) return static_cast<const char*>(src.data) + start * src.stride * esize;
  return static_cast<const char*>(src.pages[start / src.page_rows]) +
         ((start % src.page_rows) * src.stride + src.offset) * esize;
}

template <class V>
inline V LoadRow(const void* row, bool bf16, int d) {
  return bf16 ? V::Load(static_cast<const BF16*>(row) + d)
              : V::Load(static_cast<const float*>(row) + d);
}

// A [rows, hd] f32 view of rows [start, start + n) of `src` (one key block):
// the rows themselves when they are f32 and either dense or read along rows,
// else copied (bf16: widened) into `buf` ([n][hd]). `by_cols`: the caller
// walks the block down its columns (a broadcast GEMM's ByCols operand), a
// row per step; rows far apart (the model's fused QKV rows: 4 KiB at small's
// shape) share a few L1 sets and evict one another between columns, so they
// are copied first (docs/PERFORMANCE.md, "Attention in the model's layout").
// (Head blocks: the block's rows of this head follow one another.)
template <class V>
const float* F32Rows(const attention_internal::Rows& src, bool bf16, int64_t start, int n, int hd,
                     float* buf, int64_t* ld, bool by_cols = false) {
  const int64_t stride = src.head_blocks ? hd : src.stride;
  if (!bf16 && (stride == hd || !by_cols)) {
    *ld = stride;
    return reinterpret_cast<const float*>(BlockBase(src, false, start));
  }
  const char* base = BlockBase(src, bf16, start);
  for (int r = 0; r < n; ++r) {
    const void* row = base + r * stride * (bf16 ? 2 : 4);
    for (int d = 0; d < hd; d += V::kLanes) LoadRow<V>(row, bf16, d).Store(buf + r * hd + d);
  }
  *ld = hd;
  return buf;
}

// Asks for rows [start, start + n) of `src` to be brought into L2 while the
// current block computes: K/V rows of long sequences come from DRAM at a
// stride of (heads x HD) elements, which the hardware prefetchers miss.
// (Head blocks: the lines of this head's part of the block that hold the n
// rows: a run of n x HD values, or the first n keys of each d.)
inline void PrefetchRows(const attention_internal::Rows& src, bool bf16, int64_t start, int n,
                         int hd, bool keys) {
  const int64_t esize = bf16 ? 2 : 4;
  const char* base = BlockBase(src, bf16, start);
  if (src.head_blocks) {
    const int64_t run = keys ? n * esize : n * hd * esize;
    for (int d = 0; d < (keys ? hd : 1); ++d) {
      const char* part = base + d * kBc * esize;
      for (int64_t b = 0; b < run; b += 64) __builtin_prefetch(part + b, 0, 2);
    }
    return;
  }
  for (int r = 0; r < n; ++r) {
    const char* row = base + r * src.stride * esize;
    for (int64_t b = 0; b < hd * esize; b += 64) __builtin_prefetch(row + b, 0, 2);
  }
}

// A [rows, hd] f32 view of keys [start, start + n) of `src` (one key block):
// F32Rows, or from a head block's K^T ([HD][kBc]) widened into tmp ([HD][kBc])
// and transposed into buf ([kBc][HD]).
template <class V>
const float* KeyRows(const attention_internal::Rows& src, bool bf16, int64_t start, int n, int hd,
                     float* tmp, float* buf, int64_t* ld) {
  if (!src.head_blocks) return F32Rows<V>(src, bf16, start, n, hd, buf, ld);
  constexpr int W = V::kLanes;
  const int np = (n + W - 1) / W * W;
  const char* base = BlockBase(src, bf16, start);
  for (int d = 0; d < hd; ++d) {
    const char* keys = base + d * kBc * (bf16 ? 2 : 4);
    for (int c = 0; c < np; c += W) LoadRow<V>(keys, bf16, c).Store(tmp + d * kBc + c);
  }
  for (int c0 = 0; c0 < np; c0 += W) {
    for (int d0 = 0; d0 < hd; d0 += W) {
      TransposeBlock(V{}, tmp + d0 * kBc + c0, kBc, buf + c0 * hd + d0, hd);
    }
  }
  *ld = hd;
  return buf;
}

// dst[d * ld + r] = rows[r][d] * scale for the W lanes r0.. (0 past `live`),
// d < hd: whole-vector row loads into tmp ([W][hd], kept: the scaled rows),
// then W x W register transposes.
template <class V>
void PackTransposed(const void* const* rows, bool bf16, int r0, int live, int hd, float scale,
                    float* tmp, float* dst, int ld) {
  constexpr int W = V::kLanes;
  const V vs = V::Set(scale);
  for (int i = 0; i < W; ++i) {
    for (int d = 0; d < hd; d += W) {
      const V x = r0 + i < live ? LoadRow<V>(rows[r0 + i], bf16, d) * vs : V::Zero();
      x.Store(tmp + i * hd + d);
    }
  }
  for (int d = 0; d < hd; d += W) TransposeBlock(V{}, tmp + d, hd, dst + d * ld + r0, ld);
}

// rows[r][d] = src[d * ld + r] (/ l[r] when l is given) for lanes r0.. below
// `live`: W x W transposes into tmp ([W][hd]), then whole-vector row stores.
template <class V>
void UnpackTransposed(const float* src, int ld, int r0, int live, int hd, const float* l,
                      void* const* rows, bool bf16, float* tmp) {
  constexpr int W = V::kLanes;
  for (int d = 0; d < hd; d += W) TransposeBlock(V{}, src + d * ld + r0, ld, tmp + d, hd);
  for (int i = 0; i < W && r0 + i < live; ++i) {
    for (int d = 0; d < hd; d += W) {
      V x = V::Load(tmp + i * hd + d);
      if (l != nullptr) x = x / V::Set(l[r0 + i]);
      if (bf16) {
        x.Store(static_cast<BF16*>(rows[r0 + i]) + d);
      } else {
        x.Store(static_cast<float*>(rows[r0 + i]) + d);
      }
    }
  }
}

// ---- forward ------------------------------------------------------------------

// One tile of query rows against the sequence's K/V, blocks of kBc in order:
//   S^T = K_j Q'^T            (Q' = q * scale * log2 e: scores in base 2)
//   per lane: m' = max(m, max_c S), alpha = 2^(m - m'), P = 2^(S - m'),
//             l = l * alpha + sum_c P (in c order), O^T = O^T * alpha + V_j^T P^T
//   out = O / l, lse = (m + log2 l) * ln 2.
// Causal masking gives masked scores -inf (P = +0) and skips their P.V
// products outright (lane-masked FMA), so a block that is partly or wholly
// masked for a lane leaves that lane exactly as if the masked keys were absent.
template <class V>
void ForwardTile(const FwdTile& t, const FwdScratch& sc) {
  constexpr int W = V::kLanes;
  const int hd = t.head_dim;
  const int lw = (t.lanes + W - 1) / W * W;  // lanes computed (padding lanes are 0)
  const int ld = t.lanes <= 64 ? 64 : kBr;   // row stride of the [.][lane] tiles
  float* m = sc.state;
  float* l = m + kBr;
  float* alpha = l + kBr;
  float* lpos = alpha + kBr;

  float min_pos = kNoPos;
  float max_pos = 0;
  for (int r = 0; r < lw; ++r) {
    const bool live = r < t.lanes;
    lpos[r] = live ? t.pos[r] : kNoPos;
    if (live) {
      min_pos = t.pos[r] < min_pos ? t.pos[r] : min_pos;
      max_pos = t.pos[r] > max_pos ? t.pos[r] : max_pos;
    }
    m[r] = -INFINITY;
    l[r] = 0.0f;
  }
  for (int r0 = 0; r0 < lw; r0 += W) {
    PackTransposed<V>(t.q, t.in_bf16, r0, t.lanes, hd, t.qscale, sc.kf, sc.qt, ld);
  }
  for (int d = 0; d < hd; ++d) {
    for (int r = 0; r < lw; r += W) V::Zero().Store(sc.ot + d * ld + r);
  }

  const int64_t last = t.causal ? static_cast<int64_t>(max_pos) : t.kv_len - 1;
  for (int64_t start = 0; start <= last; start += kBc) {
    const int nc = static_cast<int>(t.kv_len - start < kBc ? t.kv_len - start : kBc);
    if (start + kBc <= last) {
      const int next =
          static_cast<int>(t.kv_len - start - kBc < kBc ? t.kv_len - start - kBc : kBc);
      PrefetchRows(t.k, t.in_bf16, start + kBc, next, hd, true);
      PrefetchRows(t.v, t.in_bf16, start + kBc, next, hd, false);
    }
    // Keys past the last row's position (in the causal diagonal's block)
    // are masked for every live lane: their scores are neither computed nor
    // read. (A masked key adds nothing to a lane: -inf to its max, +0 to its
    // sum, no product to O.)
    const int seen = static_cast<int>(last - start + 1 < nc ? last - start + 1 : nc);
    int64_t ks = 0;
    int64_t vs = 0;
    // (Keys first: head blocks' keys pass through sc.vf.)
    const float* kb = KeyRows<V>(t.k, t.in_bf16, start, seen, hd, sc.vf, sc.kf, &ks);
    const float* vb = F32Rows<V>(t.v, t.in_bf16, start, seen, hd, sc.vf, &vs, /*by_cols=*/true);
    // S'^T = K_j Q'^T, online softmax, O^T = O^T * alpha + V_j^T P^T.
    BcastGemm<V, Init::kZero, false>(seen, lw, ByRows(kb, ks, hd, sc.qt, ld, sc.s, ld));
    const bool diag = t.causal && static_cast<float>(start + nc - 1) > min_pos;
    OnlineSoftmax<V>(sc.s, ld, seen, lw, diag, static_cast<float>(start), lpos, m, l, alpha);
    TileOperands pv = ByCols(vb, vs, seen, sc.s, ld, sc.ot, ld);
    pv.cs = alpha;
    if (diag) {
      pv.lpos = lpos;
      pv.kpos0 = static_cast<float>(start);
      BcastGemm<V, Init::kScaled, true>(hd, lw, pv);
    } else {
      BcastGemm<V, Init::kScaled, false>(hd, lw, pv);
    }
  }

  // out = O / l (one division per element), lse = (m + log2 l) ln 2.
  for (int r0 = 0; r0 < t.lanes; r0 += W) {
    UnpackTransposed<V>(sc.ot, ld, r0, t.lanes, hd, l, t.out, t.out_bf16, sc.kf);
  }
  for (int r = 0; r < t.lanes; ++r) {
    if (t.lse[r] != nullptr) {
      *t.lse[r] = static_cast<float>(static_cast<double>(m[r]) * kLn2 +
                                     std::log(static_cast<double>(l[r])));
    }
  }
}

// ---- backward -------------------------------------------------------------------

// One (sequence, kv head): for each query head g of the group and query tile
// i (in order), for each visible KV block j (in order), with P recomputed as
// 2^(S' - lse2) and D = rowsum(dO * O):
//   dP^T = V_j dO^T,  dS^T = P^T * (dP^T - D) * scale,
//   dV_j += P^T dO,  dK_j += dS^T Q,  dQ^T += K_j^T dS^T.
// dK/dV accumulate in the f32 outputs (zeroed first) in that fixed order.
template <class V>
void BackwardUnit(const BwdUnit& u, const BwdScratch& sc) {
  constexpr int W = V::kLanes;
  const int hd = u.head_dim;
  const int ld = u.tile_rows <= 64 ? 64 : kBr;  // row stride of the [.][lane] tiles
  float* lse2 = sc.state;
  float* dsum = lse2 + kBr;
  float* lpos = dsum + kBr;
  for (int64_t r = 0; r < u.len; ++r) {
    for (int d = 0; d < hd; ++d) {
      u.dk[r * u.dk_stride + d] = 0.0f;
      u.dv[r * u.dv_stride + d] = 0.0f;
    }
  }
  for (int g = 0; g < u.group; ++g) {
    const int64_t col = static_cast<int64_t>(g) * hd;
    for (int64_t i0 = 0; i0 < u.len; i0 += u.tile_rows) {
      const int lanes = static_cast<int>(u.len - i0 < u.tile_rows ? u.len - i0 : u.tile_rows);
      const int lw = (lanes + W - 1) / W * W;
      const void* qrow[kBr];
      const void* dorow[kBr];
      for (int r = 0; r < lanes; ++r) {
        const int64_t row = i0 + r;
        qrow[r] =
            static_cast<const char*>(u.q.data) + (row * u.q.stride + col) * (u.in_bf16 ? 2 : 4);
        dorow[r] = static_cast<const char*>(u.dout.data) +
                   (row * u.dout.stride + col) * (u.do_bf16 ? 2 : 4);
      }
      for (int r0 = 0; r0 < lw; r0 += W) {
        PackTransposed<V>(qrow, u.in_bf16, r0, lanes, hd, u.qscale, sc.kf, sc.qt, ld);
        PackTransposed<V>(dorow, u.do_bf16, r0, lanes, hd, 1.0f, sc.vf, sc.dot, ld);
        // sc.vf now holds these lanes' dO rows in f32. They and the query
        // rows are also copied as dense [lane][HD] rows (sc.dor, sc.qr): dV
        // += P^T dO and dK += dS^T Q read them a lane per step, and in
        // place (rows KiBs apart) they would thrash a few L1 sets (F32Rows).
        for (int i = 0; i < W; ++i) {
          const int r = r0 + i;
          V acc = V::Zero();
          if (r < lanes) {
            const void* orow = static_cast<const char*>(u.o.data) +
                               ((i0 + r) * u.o.stride + col) * (u.o_bf16 ? 2 : 4);
            for (int d = 0; d < hd; d += W) {
              const V dov = V::Load(sc.vf + i * hd + d);
              acc = MulAdd(dov, LoadRow<V>(orow, u.o_bf16, d), acc);
              dov.Store(sc.dor + r * hd + d);
              LoadRow<V>(qrow[r], u.in_bf16, d).Store(sc.qr + r * hd + d);
            }
            lse2[r] = static_cast<float>(
                static_cast<double>(u.lse[g * u.lse_head_stride + i0 + r]) * kLog2e);
            lpos[r] = static_cast<float>(i0 + r);
          } else {
            lse2[r] = INFINITY;
            lpos[r] = kNoPos;
          }
          dsum[r] = ReduceSum(acc);
        }
      }
      for (int d = 0; d < hd; ++d) {
        for (int r = 0; r < lw; r += W) V::Zero().Store(sc.dqt + d * ld + r);
      }

      const int64_t last = u.causal ? i0 + lanes - 1 : u.len - 1;
      for (int64_t start = 0; start <= last; start += kBc) {
        const int nc = static_cast<int>(u.len - start < kBc ? u.len - start : kBc);
        if (start + kBc <= last) {
          const int next = static_cast<int>(u.len - start - kBc < kBc ? u.len - start - kBc : kBc);
          PrefetchRows(u.k, u.in_bf16, start + kBc, next, hd, true);
          PrefetchRows(u.v, u.in_bf16, start + kBc, next, hd, false);
        }
        // Keys past the tile's last row: P = +0 and dS = ±0 for every live
        // lane, so their products would add signed zeros to dV, dK and dQ
        // (accumulators that start at +0 and so are never -0: no bit
        // changes). They are skipped.
        const int seen = static_cast<int>(last - start + 1 < nc ? last - start + 1 : nc);
        int64_t ks = 0;
        int64_t vs = 0;
        const float* kb = F32Rows<V>(u.k, u.in_bf16, start, seen, hd, sc.kf, &ks, /*by_cols=*/true);
        const float* vb = F32Rows<V>(u.v, u.in_bf16, start, seen, hd, sc.vf, &vs);
        // S'^T = K_j Q'^T, dP^T = V_j dO^T; P and dS in place; dV_j += P^T dO,
        // dK_j += dS^T Q, dQ^T += K_j^T dS^T.
        BcastGemm<V, Init::kZero, false>(seen, lw, ByRows(kb, ks, hd, sc.qt, ld, sc.s, ld));
        BcastGemm<V, Init::kZero, false>(seen, lw, ByRows(vb, vs, hd, sc.dot, ld, sc.dp, ld));
        const bool diag = u.causal && start + nc - 1 > i0;
        SoftmaxGrad<V>(sc.s, sc.dp, ld, seen, lw, diag, static_cast<float>(start), lpos, lse2, dsum,
                       u.scale);
        float* dv = u.dv + start * u.dv_stride;
        float* dk = u.dk + start * u.dk_stride;
        // In the causal diagonal, key x (at start + x) pairs with lanes k
        // (at i0 + k) >= x + start - i0 only, and a lane with keys up to
        // its own position: the rest are the zeros skipped.
        TileOperands dv_op = ByRows(sc.s, ld, lanes, sc.dor, hd, dv, u.dv_stride);
        TileOperands dk_op = ByRows(sc.dp, ld, lanes, sc.qr, hd, dk, u.dk_stride);
        TileOperands dq_op = ByCols(kb, ks, seen, sc.dp, ld, sc.dqt, ld);
        if (diag) {
          for (TileOperands* op : {&dv_op, &dk_op}) {
            op->skip_early = true;
            op->early_shift = static_cast<int>(start - i0);
          }
          dq_op.skip_unseen = true;
          dq_op.lpos = lpos;
          dq_op.kpos0 = static_cast<float>(start);
        }
        BcastGemm<V, Init::kLoad, false>(seen, hd, dv_op);
        BcastGemm<V, Init::kLoad, false>(seen, hd, dk_op);
        BcastGemm<V, Init::kLoad, false>(hd, lw, dq_op);
      }
      void* dqrow[kBr];
      for (int r = 0; r < lanes; ++r) dqrow[r] = u.dq + (i0 + r) * u.dq_stride + col;
      for (int r0 = 0; r0 < lanes; r0 += W) {
        UnpackTransposed<V>(sc.dqt, ld, r0, lanes, hd, nullptr, dqrow, false, sc.kf);
      }
    }
  }
}

template <class V>
void Exp2Array(const float* x, float* y, int64_t n) {
  constexpr int W = V::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) Exp2(V::Load(x + i)).Store(y + i);
  if (i < n) Exp2(V::LoadN(x + i, static_cast<int>(n - i))).StoreN(y + i, static_cast<int>(n - i));
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::attention
