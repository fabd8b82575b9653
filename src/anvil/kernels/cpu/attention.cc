// Attention dispatcher: argument checks, scratch carving, and a static,
// cost-balanced split of whole work units over the pool's threads. Which
// thread runs a unit never changes its arithmetic, so results are the same
// for any thread count.
#include "anvil/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/check.h"
#include "anvil/kernels/cpu/attention_internal.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace {

using attention_internal::BwdScratch;
using attention_internal::BwdUnit;
using attention_internal::DecodeScratch;
using attention_internal::FwdScratch;
using attention_internal::FwdTile;
using attention_internal::kBc;
using attention_internal::kBr;
using attention_internal::Rows;

constexpr double kLog2e = 1.44269504088896340736;
constexpr int64_t kMaxSeqLen = int64_t{1} << 24;  // positions are exact in f32 below this

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t tall_tile_from = attention_internal::kTallTileFrom;

// Query rows per tile for a sequence of `len` tokens (see attention_internal.h).
int TileRows(int64_t len) { return len >= tall_tile_from ? kBr : 64; }

// KV blocks a tile of query rows [i0, i0 + lanes) visits.
int64_t TileBlocks(bool causal, int64_t i0, int lanes, int64_t len) {
  return causal ? (i0 + lanes - 1) / kBc + 1 : CeilDiv(len, kBc);
}

size_t FloatsBytes(int64_t n) { return AlignUp(static_cast<size_t>(n) * sizeof(float)); }

size_t FwdScratchBytes(int hd) {
  return 2 * FloatsBytes(int64_t{hd} * kBr) + FloatsBytes(int64_t{kBc} * kBr) +
         2 * FloatsBytes(int64_t{kBc} * hd) + FloatsBytes(5 * kBr);
}

size_t BwdScratchBytes(int hd) {
  return 5 * FloatsBytes(int64_t{hd} * kBr) + 2 * FloatsBytes(int64_t{kBc} * kBr) +
         2 * FloatsBytes(int64_t{kBc} * hd) + FloatsBytes(4 * kBr);
}

size_t DecodeScratchBytes(int hd) {
  return 2 * FloatsBytes(int64_t{attention_internal::kDecodeRows} * hd) +
         2 * FloatsBytes(int64_t{kBc} * hd) + FloatsBytes(2 * kBc);
}

// Hands out consecutive float arrays from a thread's scratch.
class Carver {
 public:
  explicit Carver(std::byte* base) : next_(base) {}
  float* Take(int64_t n) {
    float* p = reinterpret_cast<float*>(next_);
    next_ += FloatsBytes(n);
    return p;
  }

 private:
  std::byte* next_;
};

FwdScratch CarveFwd(const KernelCtx& ctx, int t, int hd) {
  Carver c(ctx.scratch(t));
  FwdScratch s;
  s.qt = c.Take(int64_t{hd} * kBr);
  s.ot = c.Take(int64_t{hd} * kBr);
  s.s = c.Take(int64_t{kBc} * kBr);
  s.kf = c.Take(int64_t{kBc} * hd);
  s.vf = c.Take(int64_t{kBc} * hd);
  s.state = c.Take(5 * kBr);
  return s;
}

DecodeScratch CarveDecode(const KernelCtx& ctx, int t, int hd) {
  Carver c(ctx.scratch(t));
  DecodeScratch s;
  s.q = c.Take(int64_t{attention_internal::kDecodeRows} * hd);
  s.o = c.Take(int64_t{attention_internal::kDecodeRows} * hd);
  s.kt = c.Take(int64_t{hd} * kBc);
  s.kf = c.Take(int64_t{kBc} * hd);
  s.p = c.Take(2 * kBc);
  return s;
}

BwdScratch CarveBwd(const KernelCtx& ctx, int t, int hd) {
  Carver c(ctx.scratch(t));
  BwdScratch s;
  s.qt = c.Take(int64_t{hd} * kBr);
  s.dot = c.Take(int64_t{hd} * kBr);
  s.dqt = c.Take(int64_t{hd} * kBr);
  s.qr = c.Take(int64_t{hd} * kBr);
  s.dor = c.Take(int64_t{hd} * kBr);
  s.s = c.Take(int64_t{kBc} * kBr);
  s.dp = c.Take(int64_t{kBc} * kBr);
  s.kf = c.Take(int64_t{kBc} * hd);
  s.vf = c.Take(int64_t{kBc} * hd);
  s.state = c.Take(4 * kBr);
  return s;
}

// One tier's entry points.
struct TierFns {
  void (*fwd)(const FwdTile&, const FwdScratch&);
  void (*decode)(const FwdTile&, const DecodeScratch&);
  void (*bwd)(const BwdUnit&, const BwdScratch&);
};

const TierFns& TierFor(Isa isa) {
  namespace ai = attention_internal;
  static constexpr TierFns kScalar{ai::FwdTileScalar, ai::DecodeTileScalar, ai::BwdUnitScalar};
  static constexpr TierFns kAvx2{ai::FwdTileAvx2, ai::DecodeTileAvx2, ai::BwdUnitAvx2};
  static constexpr TierFns kAvx512{ai::FwdTileAvx512, ai::DecodeTileAvx512, ai::BwdUnitAvx512};
  switch (isa) {
    case Isa::kAvx512:
      return kAvx512;
    case Isa::kAvx2:
      return kAvx2;
    case Isa::kScalar:
      break;
  }
  return kScalar;
}

void CheckDims(const KernelCtx& ctx, const AttentionDims& dims) {
  CHECK_GT(dims.num_heads, 0) << "attention: dims.num_heads";
  CHECK_GT(dims.num_kv_heads, 0) << "attention: dims.num_kv_heads";
  CHECK_EQ(dims.num_heads % dims.num_kv_heads, 0)
      << "attention: dims.num_kv_heads must divide dims.num_heads";
  CHECK(dims.head_dim % 16 == 0 && dims.head_dim >= 16 && dims.head_dim <= 256)
      << "attention: dims.head_dim must be a multiple of 16 in [16, 256], got " << dims.head_dim;
  CHECK(std::isfinite(dims.scale)) << "attention: dims.scale must be finite";
  CHECK_GE(ctx.scratch_bytes(), AttentionScratchBytes(dims))
      << "attention: ctx scratch per thread is smaller than AttentionScratchBytes(dims)";
}

// Checks an operand and returns its row stride (0 resolved to dense).
int64_t CheckOperand(const char* name, const void* data, DType dtype, int64_t row_stride, int heads,
                     int hd) {
  CHECK(data != nullptr) << "attention: " << name << ".data is null";
  CHECK(dtype == DType::kF32 || dtype == DType::kBF16)
      << "attention: " << name << ".dtype must be f32 or bf16, got " << DTypeName(dtype);
  const int64_t stride = row_stride == 0 ? int64_t{heads} * hd : row_stride;
  CHECK_GE(stride, int64_t{heads} * hd) << "attention: " << name << ".row_stride";
  return stride;
}

// Training attention reads plain rows: no pages, no head blocks.
void CheckRowLayout(const AttentionIn& q, const AttentionIn& k, const AttentionIn& v) {
  for (const AttentionIn* in : {&q, &k, &v}) {
    CHECK(in->pages == nullptr && !in->head_blocks)
        << "attention: pages and head blocks are for AttentionDecode's caches";
  }
}

void CheckSeqlens(std::span<const int32_t> cu) {
  CHECK_GE(cu.size(), 1u) << "attention: cu_seqlens needs num_seqs + 1 entries";
  CHECK_EQ(cu[0], 0) << "attention: cu_seqlens[0] must be 0";
  for (size_t s = 1; s < cu.size(); ++s) {
    CHECK_GE(cu[s], cu[s - 1]) << "attention: cu_seqlens must be non-decreasing at " << s;
    CHECK_LT(cu[s] - cu[s - 1], kMaxSeqLen) << "attention: sequence " << s - 1 << " is too long";
  }
}

const void* Offset(const void* base, DType dtype, int64_t elems) {
  return static_cast<const char*>(base) + elems * (dtype == DType::kBF16 ? 2 : 4);
}

// Runs `visit(t, cost, unit...)` over units in a fixed order on every thread;
// `run` is called for the units thread t owns: those whose cost midpoint
// falls in the t-th equal share of the total cost. A pure function of the
// unit list and the thread count, so the split is static and deterministic.
template <class Enumerate>
void RunBalanced(const KernelCtx& ctx, Enumerate&& enumerate) {
  int64_t total = 0;
  enumerate([&](int64_t cost, auto&&) { total += cost; });
  if (total == 0) return;
  const int threads = ctx.threads();
  ctx.pool().RunOnAll([&](int t) {
    int64_t prefix = 0;
    enumerate([&](int64_t cost, auto&& run) {
      const int64_t mid2 = 2 * prefix + cost;  // twice the midpoint
      const int owner =
          static_cast<int>(std::min<int64_t>(threads - 1, mid2 * threads / (2 * total)));
      prefix += cost;
      if (owner == t) run(t);
    });
  });
}

}  // namespace

void attention_internal::SetTallTileFromForTesting(int64_t tokens) {
  tall_tile_from = tokens < 0 ? attention_internal::kTallTileFrom : tokens;
}

size_t AttentionScratchBytes(const AttentionDims& dims) {
  return std::max({FwdScratchBytes(dims.head_dim), BwdScratchBytes(dims.head_dim),
                   DecodeScratchBytes(dims.head_dim)});
}

void AttentionForward(const KernelCtx& ctx, const AttentionDims& dims,
                      std::span<const int32_t> cu_seqlens, const AttentionIn& q,
                      const AttentionIn& k, const AttentionIn& v, const AttentionOut& out,
                      float* lse) {
  ANVIL_TRACE_ZONE("attention_fwd");
  CheckDims(ctx, dims);
  CheckSeqlens(cu_seqlens);
  const int64_t tokens = cu_seqlens.back();
  if (tokens == 0) return;
  const int nh = dims.num_heads;
  const int nkv = dims.num_kv_heads;
  const int hd = dims.head_dim;
  const int64_t qs = CheckOperand("q", q.data, q.dtype, q.row_stride, nh, hd);
  const int64_t ks = CheckOperand("k", k.data, k.dtype, k.row_stride, nkv, hd);
  const int64_t vs = CheckOperand("v", v.data, v.dtype, v.row_stride, nkv, hd);
  const int64_t os = CheckOperand("out", out.data, out.dtype, out.row_stride, nh, hd);
  CheckRowLayout(q, k, v);
  CHECK(k.dtype == q.dtype && v.dtype == q.dtype) << "attention: q, k, v must share a dtype";
  const bool causal = dims.mask == AttentionMask::kCausal;
  const float qscale = static_cast<float>(AttentionScale(dims) * kLog2e);
  const auto fn = TierFor(ctx.isa()).fwd;
  const int group = nh / nkv;
  const size_t osize = out.dtype == DType::kBF16 ? 2 : 4;

  RunBalanced(ctx, [&](auto&& visit) {
    for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
      const int64_t b = cu_seqlens[s];
      const int64_t len = cu_seqlens[s + 1] - b;
      for (int h = 0; h < nh; ++h) {
        const int rows = TileRows(len);
        for (int64_t i0 = 0; i0 < len; i0 += rows) {
          const int lanes = static_cast<int>(std::min<int64_t>(rows, len - i0));
          visit(TileBlocks(causal, i0, lanes, len) * lanes, [&](int t) {
            FwdTile tile;
            tile.lanes = lanes;
            tile.head_dim = hd;
            tile.causal = causal;
            tile.in_bf16 = q.dtype == DType::kBF16;
            tile.out_bf16 = out.dtype == DType::kBF16;
            tile.qscale = qscale;
            const int kvh = h / group;
            tile.k = {Offset(k.data, k.dtype, b * ks + int64_t{kvh} * hd), ks};
            tile.v = {Offset(v.data, v.dtype, b * vs + int64_t{kvh} * hd), vs};
            tile.kv_len = len;
            for (int r = 0; r < lanes; ++r) {
              const int64_t row = b + i0 + r;
              tile.q[r] = Offset(q.data, q.dtype, row * qs + int64_t{h} * hd);
              tile.out[r] = static_cast<char*>(out.data) + (row * os + int64_t{h} * hd) * osize;
              tile.lse[r] = lse != nullptr ? lse + h * tokens + row : nullptr;
              tile.pos[r] = static_cast<float>(i0 + r);
            }
            fn(tile, CarveFwd(ctx, t, hd));
          });
        }
      }
    }
  });
}

void AttentionBackward(const KernelCtx& ctx, const AttentionDims& dims,
                       std::span<const int32_t> cu_seqlens, const AttentionIn& q,
                       const AttentionIn& k, const AttentionIn& v, const AttentionIn& out,
                       const AttentionIn& dout, const float* lse, const AttentionGrad& dq,
                       const AttentionGrad& dk, const AttentionGrad& dv) {
  ANVIL_TRACE_ZONE("attention_bwd");
  CheckDims(ctx, dims);
  CheckSeqlens(cu_seqlens);
  const int64_t tokens = cu_seqlens.back();
  if (tokens == 0) return;
  const int nh = dims.num_heads;
  const int nkv = dims.num_kv_heads;
  const int hd = dims.head_dim;
  const int64_t qs = CheckOperand("q", q.data, q.dtype, q.row_stride, nh, hd);
  const int64_t ks = CheckOperand("k", k.data, k.dtype, k.row_stride, nkv, hd);
  const int64_t vs = CheckOperand("v", v.data, v.dtype, v.row_stride, nkv, hd);
  const int64_t os = CheckOperand("out", out.data, out.dtype, out.row_stride, nh, hd);
  CheckRowLayout(q, k, v);
  const int64_t dos = CheckOperand("dout", dout.data, dout.dtype, dout.row_stride, nh, hd);
  const int64_t dqs = CheckOperand("dq", dq.data, DType::kF32, dq.row_stride, nh, hd);
  const int64_t dks = CheckOperand("dk", dk.data, DType::kF32, dk.row_stride, nkv, hd);
  const int64_t dvs = CheckOperand("dv", dv.data, DType::kF32, dv.row_stride, nkv, hd);
  CHECK(lse != nullptr) << "attention: lse is null";
  CHECK(k.dtype == q.dtype && v.dtype == q.dtype) << "attention: q, k, v must share a dtype";
  const bool causal = dims.mask == AttentionMask::kCausal;
  const float scale = AttentionScale(dims);
  const auto fn = TierFor(ctx.isa()).bwd;
  const int group = nh / nkv;

  RunBalanced(ctx, [&](auto&& visit) {
    for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
      const int64_t b = cu_seqlens[s];
      const int64_t len = cu_seqlens[s + 1] - b;
      if (len == 0) continue;
      const int rows = TileRows(len);
      int64_t cost = 0;
      for (int64_t i0 = 0; i0 < len; i0 += rows) {
        const int lanes = static_cast<int>(std::min<int64_t>(rows, len - i0));
        cost += TileBlocks(causal, i0, lanes, len) * lanes;
      }
      for (int kvh = 0; kvh < nkv; ++kvh) {
        visit(cost * group, [&](int t) {
          const int64_t h0 = int64_t{kvh} * group;
          BwdUnit u;
          u.head_dim = hd;
          u.tile_rows = rows;
          u.group = group;
          u.causal = causal;
          u.in_bf16 = q.dtype == DType::kBF16;
          u.o_bf16 = out.dtype == DType::kBF16;
          u.do_bf16 = dout.dtype == DType::kBF16;
          u.scale = scale;
          u.qscale = static_cast<float>(scale * kLog2e);
          u.len = len;
          u.q = {Offset(q.data, q.dtype, b * qs + h0 * hd), qs};
          u.o = {Offset(out.data, out.dtype, b * os + h0 * hd), os};
          u.dout = {Offset(dout.data, dout.dtype, b * dos + h0 * hd), dos};
          u.k = {Offset(k.data, k.dtype, b * ks + int64_t{kvh} * hd), ks};
          u.v = {Offset(v.data, v.dtype, b * vs + int64_t{kvh} * hd), vs};
          u.lse = lse + h0 * tokens + b;
          u.lse_head_stride = tokens;
          u.dq = dq.data + b * dqs + h0 * hd;
          u.dq_stride = dqs;
          u.dk = dk.data + b * dks + int64_t{kvh} * hd;
          u.dk_stride = dks;
          u.dv = dv.data + b * dvs + int64_t{kvh} * hd;
          u.dv_stride = dvs;
          fn(u, CarveBwd(ctx, t, hd));
        });
      }
    }
  });
}

void AttentionDecode(const KernelCtx& ctx, const AttentionDims& dims, int64_t pos, int64_t n,
                     const AttentionIn& q, const AttentionIn& k_cache, const AttentionIn& v_cache,
                     const AttentionOut& out, float* lse) {
  const AttentionDecodeRun run{
      .pos = pos, .n = n, .q = q, .k_cache = k_cache, .v_cache = v_cache, .out = out, .lse = lse};
  AttentionDecodeBatch(ctx, dims, std::span<const AttentionDecodeRun>(&run, 1));
}

void AttentionDecodeBatch(const KernelCtx& ctx, const AttentionDims& dims,
                          std::span<const AttentionDecodeRun> runs) {
  ANVIL_TRACE_ZONE("attention_decode");
  CheckDims(ctx, dims);
  CHECK(dims.mask == AttentionMask::kCausal) << "attention: decode is causal only";
  const int nh = dims.num_heads;
  const int nkv = dims.num_kv_heads;
  const int hd = dims.head_dim;
  // Each run's operands, checked (their strides are found again per run below).
  auto cache_data = [](const AttentionIn& c) { return c.pages != nullptr ? c.pages : c.data; };
  struct Strides {
    int64_t q, k, v, out;
  };
  auto strides_of = [&](const AttentionDecodeRun& run) {
    return Strides{
        .q = CheckOperand("q", run.q.data, run.q.dtype, run.q.row_stride, nh, hd),
        .k = CheckOperand("k_cache", cache_data(run.k_cache), run.k_cache.dtype,
                          run.k_cache.row_stride, nkv, hd),
        .v = CheckOperand("v_cache", cache_data(run.v_cache), run.v_cache.dtype,
                          run.v_cache.row_stride, nkv, hd),
        .out = CheckOperand("out", run.out.data, run.out.dtype, run.out.row_stride, nh, hd)};
  };
  for (const AttentionDecodeRun& run : runs) {
    CHECK(run.pos >= 0 && run.n >= 0 && run.pos + run.n < kMaxSeqLen)
        << "attention: decode pos/n out of range";
    if (run.n == 0) continue;
    for (const AttentionIn* c : {&run.k_cache, &run.v_cache}) {
      CHECK(c->pages == nullptr || (c->page_rows > 0 && c->page_rows % kBc == 0))
          << "attention: a paged cache's page_rows must be a multiple of " << kBc << ", got "
          << c->page_rows;
    }
    CHECK(run.k_cache.dtype == run.q.dtype && run.v_cache.dtype == run.q.dtype)
        << "attention: q and the caches must share a dtype";
    const Strides st = strides_of(run);
    CHECK((!run.k_cache.head_blocks || st.k == int64_t{nkv} * hd) &&
          (!run.v_cache.head_blocks || st.v == int64_t{nkv} * hd))
        << "attention: a cache in head blocks needs a dense row stride (NKV * HD)";
  }
  const float qscale = static_cast<float>(AttentionScale(dims) * kLog2e);
  const TierFns& fns = TierFor(ctx.isa());
  const int group = nh / nkv;

  // A kv head's K or V rows in a run's cache (head blocks: the head's part
  // of each block is HD x kBc elements).
  auto kv_rows = [&](const AttentionIn& c, int64_t stride, int kvh) {
    const int64_t head = int64_t{kvh} * hd * (c.head_blocks ? kBc : 1);
    if (c.pages == nullptr) {
      return Rows{Offset(c.data, c.dtype, head), stride, nullptr, 0, 0, c.head_blocks};
    }
    return Rows{nullptr, stride, c.pages, c.page_rows, head, c.head_blocks};
  };

  RunBalanced(ctx, [&](auto&& visit) {
    for (const AttentionDecodeRun& run : runs) {
      if (run.n == 0) continue;
      const int64_t pos = run.pos, n = run.n;
      const Strides st = strides_of(run);
      const size_t osize = run.out.dtype == DType::kBF16 ? 2 : 4;
      // Lanes of a kv head: (query head g of its group, new row r) as g * n + r.
      const int64_t lanes_total = group * n;
      const int64_t blocks = (pos + n - 1) / kBc + 1;
      for (int kvh = 0; kvh < nkv; ++kvh) {
        for (int64_t l0 = 0; l0 < lanes_total; l0 += kBr) {
          const int lanes = static_cast<int>(std::min<int64_t>(kBr, lanes_total - l0));
          visit(blocks * lanes, [&](int t) {
            FwdTile tile;
            tile.lanes = lanes;
            tile.head_dim = hd;
            tile.causal = true;
            tile.in_bf16 = run.q.dtype == DType::kBF16;
            tile.out_bf16 = run.out.dtype == DType::kBF16;
            tile.qscale = qscale;
            tile.k = kv_rows(run.k_cache, st.k, kvh);
            tile.v = kv_rows(run.v_cache, st.v, kvh);
            tile.kv_len = pos + n;
            for (int r = 0; r < lanes; ++r) {
              const int64_t lane = l0 + r;
              const int64_t h = int64_t{kvh} * group + lane / n;
              const int64_t row = lane % n;
              tile.q[r] = Offset(run.q.data, run.q.dtype, row * st.q + h * hd);
              tile.out[r] =
                  static_cast<char*>(run.out.data) + (row * st.out + h * hd) * osize;
              tile.lse[r] = run.lse != nullptr ? run.lse + h * n + row : nullptr;
              tile.pos[r] = static_cast<float>(pos + row);
            }
            // Same bits either way (attention_decode_impl.h); few rows go faster by row.
            if (lanes <= attention_internal::kDecodeRows) {
              fns.decode(tile, CarveDecode(ctx, t, hd));
            } else {
              fns.fwd(tile, CarveFwd(ctx, t, hd));
            }
          });
        }
      }
    }
  });
}

}  // namespace anvil::kernels
