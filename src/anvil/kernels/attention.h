// Attention (FlashAttention-2 on CPUs): forward, backward and KV-cache decode
// over packed variable-length sequences, with grouped-query heads. Memory is
// O(tokens x head_dim): no T x T buffer, only per-thread block scratch.
// Determinism and batch invariance (DESIGN.md contracts 1-3): see "Order".
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "anvil/core/dtype.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

// Order. Every query row walks its sequence's keys/values in blocks of
// kAttentionKvBlock positions counted from the sequence (document) start, in
// increasing order, with online softmax (running max m, running sum l, output
// accumulator o rescaled by 2^(m_old - m_new) per block). All per-row
// arithmetic is a fixed sequence of f32 operations on that row's data (dot
// products and sums in increasing index order, one rounding per FMA), the same
// whatever the query tiling, the thread count, the other sequences in the
// batch, or whether the row comes from AttentionForward or AttentionDecode.
// So: forward outputs of a row are bitwise the same in any batch and for any
// threads, and AttentionDecode reproduces AttentionForward's rows bit for bit.
// Different ISA tiers (scalar, AVX2, AVX-512) may differ in the last bits.
inline constexpr int kAttentionKvBlock = 64;

enum class AttentionMask : uint8_t {
  kCausal,  // row at position i sees positions 0..i of its sequence
  kFull,    // row sees its whole sequence
};

struct AttentionDims {
  int num_heads = 0;     // NH
  int num_kv_heads = 0;  // NKV; divides NH. Query head h reads kv head h / (NH / NKV).
  int head_dim = 0;      // HD: a multiple of 16 in [16, 256]
  AttentionMask mask = AttentionMask::kCausal;
  float scale = 0.0f;  // softmax scale; 0 means 1/sqrt(HD) (see AttentionScale)
};

// The scale the kernels use: dims.scale, or the float nearest 1/sqrt(HD).
inline float AttentionScale(const AttentionDims& dims) {
  return dims.scale != 0.0f
             ? dims.scale
             : static_cast<float>(1.0 / std::sqrt(static_cast<double>(dims.head_dim)));
}

// A read-only operand of `heads` heads per token row: element (t, h, d) is at
// data[t * row_stride + h * HD + d] (counted in elements of `dtype`). A stride
// larger than heads * HD reads straight out of a fused projection, e.g. QKV
// [tokens, (NH + 2 NKV) * HD]: q at +0, k at +NH*HD, v at +(NH+NKV)*HD.
struct AttentionIn {
  const void* data = nullptr;
  DType dtype = DType::kF32;  // kF32 or kBF16
  int64_t row_stride = 0;     // 0: heads * HD (dense)
  // Paged (AttentionDecode's caches only): with `pages`, row t is row
  // t % page_rows of page pages[t / page_rows] (each laid out as above; data
  // unused). page_rows is a multiple of kAttentionKvBlock, so each block of
  // keys lies in one page and the order, and the bits, do not change.
  const void* const* pages = nullptr;
  int64_t page_rows = 0;
  // Head blocks (AttentionDecode's caches only): each kAttentionKvBlock rows,
  // counted from row 0 (or from a page's first row), hold their elements
  // head by head in the extent the rows would take: a K cache's keys
  // transposed, [HD][block] (HeadBlockKey), a V cache's values as rows,
  // [block][HD] (HeadBlockValue). A decode tile then reads one head's keys
  // and values of a block as one run of memory (rows would give it a sliver
  // of every row of heads x HD), and the keys as vectors without a transpose
  // at every call. The row stride must be dense (heads x HD), and the cache
  // (or page) must extend to its last block's end.
  bool head_blocks = false;
};

// Where element (t, h, d) of a cache in head blocks of `heads` heads lies, in
// elements from the cache's (or the page's) first row, t counted from there.
inline int64_t HeadBlockKey(int64_t t, int64_t h, int64_t d, int64_t heads, int64_t hd) {
  constexpr int64_t b = kAttentionKvBlock;
  return (t / b) * b * heads * hd + (h * hd + d) * b + t % b;
}
inline int64_t HeadBlockValue(int64_t t, int64_t h, int64_t d, int64_t heads, int64_t hd) {
  constexpr int64_t b = kAttentionKvBlock;
  return (t / b) * b * heads * hd + (h * b + t % b) * hd + d;
}

struct AttentionOut {
  void* data = nullptr;
  DType dtype = DType::kF32;  // kF32 or kBF16 (rounded to nearest even once, at the end)
  int64_t row_stride = 0;     // 0: heads * HD
};

// Gradients are f32: dK and dV accumulate over query blocks and GQA heads in
// place (in a fixed order), which needs f32 storage; dQ follows for symmetry.
struct AttentionGrad {
  float* data = nullptr;
  int64_t row_stride = 0;  // 0: heads * HD
};

// Sequences are given FA2-style by cumulative offsets: cu_seqlens holds
// num_seqs + 1 int32 values, cu_seqlens[0] == 0, non-decreasing; sequence s is
// token rows [cu_seqlens[s], cu_seqlens[s+1]) and attention never crosses a
// boundary. tokens = cu_seqlens.back(); each sequence is shorter than 2^24.
//
// q [tokens, NH, HD], k/v [tokens, NKV, HD] (same dtype: f32 or bf16; math is
// f32 either way). out [tokens, NH, HD]. lse [NH, tokens] f32 (nullable):
// natural log of each row's softmax denominator, sum_j exp(scale * q.k_j), as
// the backward needs it. Memory: no T x T buffer; each thread uses up to
// AttentionScratchBytes(dims) of ctx.scratch(t) (CHECKed).
void AttentionForward(const KernelCtx& ctx, const AttentionDims& dims,
                      std::span<const int32_t> cu_seqlens, const AttentionIn& q,
                      const AttentionIn& k, const AttentionIn& v, const AttentionOut& out,
                      float* lse);

// Gradients of sum(out * dout) with respect to q, k, v (overwritten, `=`), from
// the forward's out and lse (recomputing the attention weights blockwise).
// dq [tokens, NH, HD], dk/dv [tokens, NKV, HD], f32; they must not overlap the
// inputs. out and dout may each be f32 or bf16. Deterministic and identical
// for any thread count: each thread owns whole (sequence, kv head) units and
// reduces dK/dV over the unit's query heads and query blocks in a fixed order.
// Parallelism is therefore num_seqs * NKV units.
void AttentionBackward(const KernelCtx& ctx, const AttentionDims& dims,
                       std::span<const int32_t> cu_seqlens, const AttentionIn& q,
                       const AttentionIn& k, const AttentionIn& v, const AttentionIn& out,
                       const AttentionIn& dout, const float* lse, const AttentionGrad& dq,
                       const AttentionGrad& dk, const AttentionGrad& dv);

// Decode: n new query rows at positions pos..pos+n-1 of one sequence against a
// KV cache whose rows 0..pos+n-1 are filled (the new rows' k/v included),
// causal only. q and out are [n, NH, HD], lse [NH, n] (nullable), caches
// [>= pos+n, NKV, HD] with their own row strides, contiguous or paged. Each
// row is bitwise equal to the same row of AttentionForward over the whole
// sequence (same ISA tier).
void AttentionDecode(const KernelCtx& ctx, const AttentionDims& dims, int64_t pos, int64_t n,
                     const AttentionIn& q, const AttentionIn& k_cache, const AttentionIn& v_cache,
                     const AttentionOut& out, float* lse);

// AttentionDecode for runs of rows of several sequences in one parallel
// region (a decode step of a batch: one region instead of one a sequence),
// each run's rows bitwise as AttentionDecode gives them.
struct AttentionDecodeRun {
  int64_t pos = 0, n = 0;
  AttentionIn q, k_cache, v_cache;
  AttentionOut out;
  float* lse = nullptr;
};
void AttentionDecodeBatch(const KernelCtx& ctx, const AttentionDims& dims,
                          std::span<const AttentionDecodeRun> runs);

// Bytes of ctx.scratch(t) each thread needs for any of the calls above.
size_t AttentionScratchBytes(const AttentionDims& dims);

}  // namespace anvil::kernels
