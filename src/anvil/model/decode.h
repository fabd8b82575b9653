// Incremental decoding with a KV cache: prefill a prompt, then append tokens
// one at a time (or one per sequence, batched), getting logits. It runs the
// training forward's kernels on the same weights (GEMM, RMSNorm, RoPE,
// SwiGLU) and kernels::AttentionDecode on the cache, so every logit is bitwise
// equal to Llama::Logits on the whole sequence (DESIGN.md contract 3). It
// reads a model through its ForwardWeights: a training Llama's, or an
// InferenceModel's (no training model needed).
// Sizes are fixed at construction; a call allocates nothing.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/arena.h"
#include "anvil/kernels/attention.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/bf16_linear.h"
#include "anvil/model/forward_weights.h"
#include "anvil/model/low_precision_linear.h"

namespace anvil::model {

class Decoder {
 public:
  // A cache for `max_seqs` sequences of up to `max_len` positions (<=
  // model.max_seq_len) and scratch for up to `max_rows` token rows per call.
  // The model's weights are read at each call (they may change in between).
  // With `linear` (it outlives the decoder; f32 activations, or a bf16
  // model's with a linear that takes them) every layer's linear GEMMs run
  // through it instead: IntLinear's quantized inference gives that format's
  // logits, not Llama::Logits'; PackedLinear gives the model's own bits from
  // weights packed once.
  Decoder(const ForwardWeights& model, int64_t max_seqs, int64_t max_len, int64_t max_rows,
          const LowPrecisionLinear* linear = nullptr);

  // A paged cache: `pages` pages of `page_rows` positions (a multiple of
  // kernels::kAttentionKvBlock) for all layers, handed to sequences as they
  // grow; Fork shares a prefix's pages between sequences (a shared page is
  // copied when a sequence writes into it). The logits are the contiguous
  // cache's bit for bit.
  struct Paging {
    int64_t page_rows = 0;  // 0: contiguous, max_len positions per sequence
    int64_t pages = 0;      // 0: enough for every sequence at max_len
  };
  Decoder(const ForwardWeights& model, int64_t max_seqs, int64_t max_len, int64_t max_rows,
          const LowPrecisionLinear* linear, Paging paging);

  void Reset();  // every sequence empty
  void Reset(int64_t seq);
  // Paged: sequence `dst` becomes the first `length` positions of `src`
  // (<= src's length), sharing their pages.
  void Fork(int64_t src, int64_t dst, int64_t length);
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t length(int64_t seq) const { return lengths_[seq]; }
  int64_t max_seqs() const { return max_seqs_; }
  int64_t max_len() const { return max_len_; }
  int64_t max_rows() const { return max_rows_; }
  // Bytes held: the KV cache and the decode scratch.
  int64_t bytes() const { return static_cast<int64_t>(cache_.size() + arena_.capacity()); }

  // Appends `tokens` (a prompt, a chunk of one, or one token) to sequence
  // `seq`; logits [tokens.size(), V] for the appended positions.
  void Append(const kernels::KernelCtx& ctx, int64_t seq, std::span<const int32_t> tokens,
              float* logits);
  // Appends prompts[i] to the distinct sequences seqs[i] in one batched pass
  // (at most max_rows tokens in all), with the logits of each one's last
  // position only: logits [seqs.size(), V]. The same bits as Append of each.
  void Prefill(const kernels::KernelCtx& ctx, std::span<const int64_t> seqs,
               std::span<const std::span<const int32_t>> prompts, float* logits);
  // One token for each sequence 0..tokens.size()-1 in one batched pass;
  // logits [tokens.size(), V].
  void Step(const kernels::KernelCtx& ctx, std::span<const int32_t> tokens, float* logits);
  // One token for each of the distinct sequences `seqs` (any order), batched.
  void Step(const kernels::KernelCtx& ctx, std::span<const int64_t> seqs,
            std::span<const int32_t> tokens, float* logits);

 private:
  template <typename A>
  struct Scratch {
    float* x = nullptr;  // [R, C]
    float* y = nullptr;  // [R, C]
    AttentionSaved<A> attn;
    MlpSaved<A> mlp;
    HeadSaved<A> head;
    std::optional<Bf16Head> bf16_head;  // in its place: an FP8 model's head in bf16
    BlockScratch<A> block;
    std::shared_ptr<Fp8Linear> fp8;  // FP8 precisions: block.linear and its buffers
    std::shared_ptr<Bf16Linear> bf16;  // the kept layers' bf16 GEMMs (high_precision_bf16)
    std::vector<Fp8Linear> site_fp8;  // fp8-delayed: per layer and site, the model's scales
  };
  template <typename Alloc, typename A>
  void Carve(Alloc&& alloc, Scratch<A>& s);
  // Rows r of seqs[r] at positions lengths + (index within the run of equal
  // seqs); rows of one sequence are consecutive.
  // `head_rows`: the rows whose logits are made (empty: all n), in order.
  template <typename A>
  void Run(const kernels::KernelCtx& ctx, int64_t n, std::span<const int32_t> tokens,
           float* logits, std::span<const int64_t> head_rows = {});
  void Dispatch(const kernels::KernelCtx& ctx, int64_t n, std::span<const int32_t> tokens,
                float* logits, std::span<const int64_t> head_rows = {});
  template <typename A>
  A* Block(int layer, int kv, int64_t seq, int64_t block);  // [kBc, NKV*HD] (contiguous)
  // Where position `pos` of `seq` lives (either layout).
  template <typename A>
  A* CacheRow(int layer, int kv, int64_t seq, int64_t pos);
  // Position `pos` of `seq`: its new key and value rows into the cache.
  template <typename A>
  void WriteKv(int layer, int64_t seq, int64_t pos, const A* k, const A* v);
  // The kernel's view of a sequence's cache, in head blocks and as pages:
  // appends the sequence's page table (contiguous: its blocks, as pages of
  // one block) to page_ptrs_[kv] (cleared for each layer's attention) and
  // points into it.
  template <typename A>
  kernels::AttentionIn CacheIn(int layer, int kv, int64_t seq);
  // Paged: pages for positions [from, to) of seq, each writable (not shared).
  void Reserve(int64_t seq, int64_t from, int64_t to);
  void ReleasePages(int64_t seq);
  std::byte* Page(int32_t page, int layer, int kv);

  const ForwardWeights& fw_;
  const LowPrecisionLinear* linear_;
  int64_t max_seqs_, max_len_, max_rows_;
  std::vector<int64_t> lengths_;
  std::vector<int64_t> row_seq_;    // [R]
  std::vector<int64_t> step_seqs_;  // Step's 0..n-1
  std::vector<int32_t> positions_;  // [R]
  std::vector<int32_t> prefill_tokens_;   // Prefill's rows, all prompts
  std::vector<int64_t> prefill_last_;     // the row of each prompt's last token
  // Contiguous: [L, 2, blocks_, S, kBc, NKV*HD] of A, max_len rounded up to
  // whole blocks of kBc positions; each block of K and V in head blocks
  // (kernels::AttentionIn::head_blocks), as are the pages'. Block-major: a
  // layer's first blocks of every sequence lie one after another, so a
  // thread's walk over its sequences' blocks reads on in memory instead of
  // jumping over each sequence's unused blocks.
  AlignedBuffer cache_;
  int64_t blocks_ = 0;
  // Paged: cache_ is [pages, L, 2, page_rows, NKV*HD]; each sequence's
  // pages in position order, each page's sharers, the free ones.
  int64_t page_rows_ = 0;
  size_t elem_ = 4;
  std::vector<std::vector<int32_t>> tables_;  // [S]
  std::vector<int32_t> refs_;                 // [pages]
  std::vector<int32_t> free_;
  // A layer's K and V tables (pages, or a contiguous cache's blocks), run after run.
  std::vector<const void*> page_ptrs_[2];
  std::vector<kernels::AttentionDecodeRun> decode_runs_;  // a step's attention, per sequence
  Arena arena_;
  Scratch<float> scratch_f32_;
  Scratch<BF16> scratch_bf16_;
};

}  // namespace anvil::model
