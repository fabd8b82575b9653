// Attention internals shared by the dispatcher (attention.cc) and the per-ISA
// units: the unit of forward work (a tile of query rows against one sequence's
// K/V), the unit of backward work (one sequence x kv head), carved scratch and
// each tier's entry points. Plain data only, so ISA units can include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "anvil/kernels/attention.h"

namespace anvil::kernels::attention_internal {

// Block sizes (f32 working set at HD 64; HD 128 doubles the HD-sized parts).
// Query rows are vector lanes: S is held transposed, [key][query row], so the
// online-softmax state is per lane and needs no horizontal reductions.
// A tile of Br query rows keeps Q'^T and O^T (HD x Br x 4 B: 16 + 16 KiB at
// Br 64) and the S/P tile (Bc x Br x 4 B = 16 KiB) in the 48 KiB L1d, while
// each K_j / V_j block (Bc x HD x 4 B = 16 KiB) comes in from L2 and serves
// all Br rows. Every tile reads the K/V of its sequence once, so a sequence
// costs T / Br passes over K/V: once K/V outgrow L2/L3 (long sequences) the
// tiles are 128 rows (half the passes; working set 96 KiB, in L2), below that
// 64 rows (a causal tile computes its diagonal block for all its rows, so
// taller tiles waste more: measured 223 vs 180 GFLOP/s at T = 256, 260 vs 222
// at T = 16384, equal at 4096).
//
// Bc: the KV block (it fixes the summation order, see attention.h). 64 keys
// amortise the per-block softmax bookkeeping (max, exp of the rescale, O^T *=
// alpha: 1/Bc of the matmul work) and keep the diagonal waste at half a block;
// Bc = 128 measured within noise at T = 1024..4096 and slower at T = 256 (191
// vs 223 GFLOP/s) and 16384 (207 vs 260).
inline constexpr int kBc = kAttentionKvBlock;
// Br: lanes per tile at most (scratch is sized for it).
inline constexpr int kBr = 128;
// Sequences of at least this many tokens use kBr-row tiles, shorter ones 64.
inline constexpr int64_t kTallTileFrom = 4096;
// Test seam: the threshold the dispatcher uses (tokens < 0: back to kTallTileFrom).
void SetTallTileFromForTesting(int64_t tokens);

// Rows of a [rows, HD] slice: row r at data + r * stride (elements), or
// paged (pages != null): at pages[r / page_rows] + (r % page_rows) * stride
// + offset. Kernels read rows a key block at a time, and a block never
// straddles pages (page_rows is a multiple of kBc).
// Head blocks (a decode's caches, attention.h): the block starting at row r
// (a multiple of kBc) sits where that row would, and holds this head's part
// as [HD][kBc] for keys (transposed) or [kBc][HD] for values; data (or
// offset) points at the head's part of block 0.
struct Rows {
  const void* data;
  int64_t stride;
  const void* const* pages = nullptr;
  int64_t page_rows = 0;
  int64_t offset = 0;  // elements, paged only
  bool head_blocks = false;
};

// Up to kBr query rows ("lanes") that share one sequence's K/V (one kv head):
// consecutive rows of one head in training, (GQA head, new row) pairs in decode.
struct FwdTile {
  int lanes;
  int head_dim;
  bool causal;
  bool in_bf16;   // q, k, v are BF16 (else float)
  bool out_bf16;  // out is BF16 (else float)
  float qscale;   // softmax scale * log2(e): the kernel works in base 2
  Rows k, v;      // the sequence's keys/values, rows [0, kv_len)
  int64_t kv_len;
  const void* q[kBr];  // each lane's query vector (HD elements)
  void* out[kBr];      // each lane's output vector
  float* lse[kBr];     // each lane's lse, nullptr: not stored
  float pos[kBr];      // each lane's position in the sequence (exact: < 2^24)
};

// Forward scratch, carved by the dispatcher: float arrays.
struct FwdScratch {
  float* qt;     // [HD][kBr]  scaled queries, transposed
  float* ot;     // [HD][kBr]  output accumulator, transposed
  float* s;      // [kBc][kBr] scores, then probabilities
  float* kf;     // [kBc][HD]  bf16 keys widened
  float* vf;     // [kBc][HD]  values copied dense (F32Rows), bf16 widened
  float* state;  // [5][kBr]   m, l, alpha, lane position, scratch
};

// Decode tiles of at most this many rows run DecodeTile
// (attention_decode_impl.h): one row per pass with whole vectors along keys
// and HD, where a row-per-lane tile would fill 1..8 of 16 lanes.
inline constexpr int kDecodeRows = 8;

// Decode-tile scratch, carved by the dispatcher: float arrays.
struct DecodeScratch {
  float* q;   // [kDecodeRows][HD] scaled queries
  float* o;   // [kDecodeRows][HD] output accumulators
  float* kt;  // [HD][kBc]         a K block given as rows, transposed
  float* kf;  // [kBc][HD]         a K block given as rows, staged as f32 rows
  float* p;   // [2][kBc]          a row pair's scores, then probabilities
};

// One (sequence, kv head): its G = NH / NKV query heads, all query blocks.
struct BwdUnit {
  int head_dim;
  int tile_rows;  // query rows per tile, <= kBr
  int group;      // G
  bool causal;
  bool in_bf16;  // q, k, v
  bool o_bf16;   // out
  bool do_bf16;  // dout
  float scale;
  float qscale;      // scale * log2(e)
  int64_t len;       // sequence length
  Rows q, o, dout;   // at the sequence's first row and the group's first q head; head g at +g*HD
  Rows k, v;         // at the sequence's first row and the kv head
  const float* lse;  // lse of the group's first head at the sequence's first row
  int64_t lse_head_stride;
  float* dq;  // at (first row, first q head); head g at +g*HD
  int64_t dq_stride;
  float* dk;
  int64_t dk_stride;
  float* dv;
  int64_t dv_stride;
};

struct BwdScratch {
  float* qt;     // [HD][kBr]  scaled queries, transposed
  float* dot;    // [HD][kBr]  dout, transposed
  float* dqt;    // [HD][kBr]  dQ accumulator, transposed
  float* qr;     // [kBr][HD]  query rows, dense (bf16 widened)
  float* dor;    // [kBr][HD]  dout rows, dense (bf16 widened)
  float* s;      // [kBc][kBr] scores, then P
  float* dp;     // [kBc][kBr] dP, then dS
  float* kf;     // [kBc][HD]
  float* vf;     // [kBc][HD]
  float* state;  // [4][kBr]   lse (base 2), D, lane position, scratch
};

// Per tier (scalar in attention.cc, the others in attention_avx2.cc and
// attention_avx512.cc). Call only after the run-time ISA check.
void FwdTileScalar(const FwdTile& tile, const FwdScratch& scratch);
void FwdTileAvx2(const FwdTile& tile, const FwdScratch& scratch);
void FwdTileAvx512(const FwdTile& tile, const FwdScratch& scratch);
void DecodeTileScalar(const FwdTile& tile, const DecodeScratch& scratch);
void DecodeTileAvx2(const FwdTile& tile, const DecodeScratch& scratch);
void DecodeTileAvx512(const FwdTile& tile, const DecodeScratch& scratch);
void BwdUnitScalar(const BwdUnit& unit, const BwdScratch& scratch);
void BwdUnitAvx2(const BwdUnit& unit, const BwdScratch& scratch);
void BwdUnitAvx512(const BwdUnit& unit, const BwdScratch& scratch);

// The tiers' exp2 (test hook): y[i] = 2^x[i] as the kernels compute it.
void Exp2Scalar(const float* x, float* y, int64_t n);
void Exp2Avx2(const float* x, float* y, int64_t n);
void Exp2Avx512(const float* x, float* y, int64_t n);

}  // namespace anvil::kernels::attention_internal
