// Decoder: KV-cache prefill and steps over the training blocks' pieces.
#include "anvil/model/decode.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "anvil/kernels/attention.h"
#include "anvil/model/embedding_block.h"
#include "anvil/profile/trace.h"

namespace anvil::model {
namespace {

// Fewer new rows than this are written to the cache inline: waking the
// threads costs more than their writes.
constexpr int64_t kParallelKvRows = 8;

}  // namespace

Decoder::Decoder(const ForwardWeights& model, int64_t max_seqs, int64_t max_len, int64_t max_rows,
                 const LowPrecisionLinear* linear)
    : Decoder(model, max_seqs, max_len, max_rows, linear, Paging{}) {}

Decoder::Decoder(const ForwardWeights& model, int64_t max_seqs, int64_t max_len, int64_t max_rows,
                 const LowPrecisionLinear* linear, Paging paging)
    : fw_(model), linear_(linear), max_seqs_(max_seqs), max_len_(max_len), max_rows_(max_rows) {
  const ModelConfig& cfg = model.config;
  CHECK(max_seqs > 0 && max_rows > 0) << "decoder sizes";
  decode_runs_.reserve(max_rows);  // a step's runs: at most one a row
  CHECK(model.whole()) << "the decoder runs a whole model, not a stage";
  CHECK(max_len > 0 && max_len <= cfg.max_seq_len)
      << "max_len " << max_len << " beyond model.max_seq_len";
  CHECK(linear == nullptr || !Bf16Activations(model.precision) || linear->TakesBf16())
      << "a decoder's own linear layers need f32 activations (an f32 or FP8 model), or to take "
         "bf16 ones (weights packed once)";
  lengths_.assign(max_seqs, 0);
  row_seq_.resize(max_rows);
  positions_.resize(max_rows);
  prefill_tokens_.reserve(max_rows);  // Prefill's: sized here, so a call allocates nothing
  prefill_last_.reserve(max_seqs);
  const bool bf16 = model.precision == Precision::kBF16;
  const size_t elem = bf16 ? sizeof(BF16) : sizeof(float);
  elem_ = elem;
  if (paging.page_rows == 0) {
    // Whole head blocks: a sequence's last block spans all its rows.
    constexpr int64_t kBlock = kernels::kAttentionKvBlock;
    blocks_ = (max_len + kBlock - 1) / kBlock;
    cache_ =
        AlignedBuffer(cfg.n_layers * 2 * blocks_ * max_seqs * kBlock * model.shape.kv() * elem);
    // The kernel sees each sequence's blocks through a table, as pages.
    for (auto& ptrs : page_ptrs_) ptrs.reserve(max_seqs * blocks_);
  } else {
    CHECK(paging.page_rows > 0 && paging.page_rows % kernels::kAttentionKvBlock == 0)
        << "page_rows " << paging.page_rows << " must be a multiple of "
        << kernels::kAttentionKvBlock;
    page_rows_ = paging.page_rows;
    const int64_t pages = paging.pages > 0
                              ? paging.pages
                              : max_seqs * ((max_len + page_rows_ - 1) / page_rows_);
    cache_ = AlignedBuffer(pages * cfg.n_layers * 2 * page_rows_ * model.shape.kv() * elem);
    tables_.resize(max_seqs);
    refs_.assign(pages, 0);
    for (int64_t p = pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
    // Every sequence's table at once (a step's runs), never reallocated.
    for (auto& ptrs : page_ptrs_) ptrs.reserve(max_seqs * ((max_len + page_rows_ - 1) / page_rows_));
  }
  // Scratch: carve once with a counter to size the arena, then for real.
  auto carve_all = [&](auto&& alloc) {
    if (bf16) {
      Carve(alloc, scratch_bf16_);
    } else {
      Carve(alloc, scratch_f32_);
    }
  };
  size_t bytes = 0;
  carve_all([&](size_t b) -> std::byte* {
    bytes += AlignUp(b);
    return nullptr;
  });
  arena_ = Arena(bytes, "decode");
  carve_all([&](size_t b) { return arena_.Allocate(b); });
  if (Fp8DelayedScaling* delayed = model.fp8_delayed; delayed != nullptr && linear == nullptr) {
    // The model's delayed scales, read (decoding records no amax).
    for (int site = 0; site < cfg.n_layers * kLinearSites; ++site) {
      scratch_f32_.site_fp8.push_back(scratch_f32_.fp8->AtSite(site, delayed));
    }
  }
}

template <typename Alloc, typename A>
void Decoder::Carve(Alloc&& alloc, Scratch<A>& s) {
  const BlockShape& shape = fw_.shape;  // this rank's heads and FFN columns
  const int64_t r = max_rows_, c = shape.dim, f = shape.ffn;
  auto f32 = [&](int64_t n) { return reinterpret_cast<float*>(alloc(n * sizeof(float))); };
  auto act = [&](int64_t n) { return reinterpret_cast<A*>(alloc(n * sizeof(A))); };
  s.x = f32(r * c);
  s.y = f32(r * c);
  s.attn = {f32(r), act(r * c), act(r * shape.qkv()), act(r * shape.q()), f32(shape.heads * r)};
  s.mlp = {f32(r), act(r * c), act(r * 2 * f), act(r * f)};
  s.block.norm_f32 = f32(r * c);
  if (fw_.HighPrecisionBf16()) {
    auto bf16s = [&](int64_t n) { return reinterpret_cast<BF16*>(alloc(n * sizeof(BF16))); };
    s.bf16_head = Bf16Head{.saved = {f32(r), bf16s(r * c), nullptr, nullptr, nullptr, nullptr},
                           .scratch = {.norm_f32 = s.block.norm_f32}};
  } else {
    s.head = {f32(r), act(r * c), nullptr, nullptr, nullptr, nullptr};
  }
  if (IsFp8(fw_.precision) && linear_ == nullptr) {
    // The training forward's FP8 linear layers: one quantization per row and
    // the same weight blocks, so every logit is Llama::Logits' bit for bit.
    s.fp8 = MakeFp8Linear(fw_.precision, fw_.fp8, shape, r, alloc);
    s.block.SetLinear(s.fp8.get());
    if (fw_.HighPrecisionBf16() && fw_.fp8_high_precision_layers > 0) {
      s.bf16 = MakeBf16Linear(shape, r, alloc);
    }
  }
}

template <typename A>
A* Decoder::Block(int layer, int kv, int64_t seq, int64_t block) {
  constexpr int64_t kBlock = kernels::kAttentionKvBlock;
  const int64_t row = fw_.shape.kv();
  return reinterpret_cast<A*>(cache_.data()) +
         (((static_cast<int64_t>(layer) * 2 + kv) * blocks_ + block) * max_seqs_ + seq) * kBlock *
             row;
}

std::byte* Decoder::Page(int32_t page, int layer, int kv) {
  const int64_t page_bytes = page_rows_ * fw_.shape.kv() * static_cast<int64_t>(elem_);
  return cache_.data() +
         ((static_cast<int64_t>(page) * fw_.config.n_layers + layer) * 2 + kv) * page_bytes;
}

template <typename A>
A* Decoder::CacheRow(int layer, int kv, int64_t seq, int64_t pos) {
  const int64_t row = fw_.shape.kv();
  if (page_rows_ == 0) {
    constexpr int64_t kBlock = kernels::kAttentionKvBlock;
    return Block<A>(layer, kv, seq, pos / kBlock) + (pos % kBlock) * row;
  }
  return reinterpret_cast<A*>(Page(tables_[seq][pos / page_rows_], layer, kv)) +
         (pos % page_rows_) * row;
}

template <typename A>
void Decoder::WriteKv(int layer, int64_t seq, int64_t pos, const A* k, const A* v) {
  // The rows' block: its first row's place, in either layout (a block never
  // straddles pages). Key element i = h * HD + d at i * kBc + pos % kBc
  // (kernels::HeadBlockKey), head h's value row at (h * kBc + pos % kBc) * HD.
  constexpr int64_t kBc = kernels::kAttentionKvBlock;
  const int64_t hd = fw_.shape.head_dim, heads = fw_.shape.kv_heads, t = pos % kBc;
  A* keys = CacheRow<A>(layer, 0, seq, pos - t);
  A* values = CacheRow<A>(layer, 1, seq, pos - t);
  for (int64_t i = 0; i < heads * hd; ++i) keys[i * kBc + t] = k[i];
  for (int64_t h = 0; h < heads; ++h) {
    std::memcpy(values + (h * kBc + t) * hd, v + h * hd, hd * sizeof(A));
  }
}

template <typename A>
kernels::AttentionIn Decoder::CacheIn(int layer, int kv, int64_t seq) {
  constexpr DType dt = kActDType<A>;
  const int64_t row = fw_.shape.kv();
  std::vector<const void*>& ptrs = page_ptrs_[kv];  // capacity reserved: no allocation
  const size_t first = ptrs.size();
  // Within the capacity, so the step's earlier runs keep their tables.
  const size_t entries = page_rows_ == 0 ? blocks_ : tables_[seq].size();
  CHECK_LE(first + entries, ptrs.capacity()) << "decoder: page tables overflow";
  if (page_rows_ == 0) {  // the blocks, as pages of one block
    for (int64_t b = 0; b < blocks_; ++b) ptrs.push_back(Block<A>(layer, kv, seq, b));
    return {nullptr, dt, row, ptrs.data() + first, kernels::kAttentionKvBlock, true};
  }
  for (const int32_t page : tables_[seq]) ptrs.push_back(Page(page, layer, kv));
  return {nullptr, dt, row, ptrs.data() + first, page_rows_, true};
}

void Decoder::ReleasePages(int64_t seq) {
  if (page_rows_ == 0) return;
  for (const int32_t page : tables_[seq]) {
    if (--refs_[page] == 0) free_.push_back(page);
  }
  tables_[seq].clear();
}

void Decoder::Reserve(int64_t seq, int64_t from, int64_t to) {
  if (page_rows_ == 0) return;
  std::vector<int32_t>& table = tables_[seq];
  const int64_t page_bytes = page_rows_ * fw_.shape.kv() * static_cast<int64_t>(elem_);
  for (int64_t i = from / page_rows_; i <= (to - 1) / page_rows_; ++i) {
    if (i < static_cast<int64_t>(table.size()) && refs_[table[i]] == 1) continue;
    CHECK(!free_.empty()) << "the paged KV cache is out of pages (" << refs_.size()
                          << " pages of " << page_rows_ << " positions)";
    const int32_t page = free_.back();
    free_.pop_back();
    refs_[page] = 1;
    if (i < static_cast<int64_t>(table.size())) {  // shared: copy, then write the copy
      const int32_t shared = table[i];
      for (int l = 0; l < fw_.config.n_layers; ++l) {
        for (int kv = 0; kv < 2; ++kv) std::memcpy(Page(page, l, kv), Page(shared, l, kv), page_bytes);
      }
      --refs_[shared];
      table[i] = page;
    } else {
      table.push_back(page);
    }
  }
}

void Decoder::Reset() {
  for (int64_t s = 0; s < max_seqs_; ++s) Reset(s);
}

void Decoder::Reset(int64_t seq) {
  ReleasePages(seq);
  lengths_[seq] = 0;
}

void Decoder::Fork(int64_t src, int64_t dst, int64_t length) {
  CHECK(page_rows_ > 0) << "Fork needs a paged decoder";
  CHECK(src != dst && length >= 0 && length <= lengths_[src]) << "Fork of " << length
                                                              << " positions";
  Reset(dst);
  const int64_t pages = (length + page_rows_ - 1) / page_rows_;
  for (int64_t i = 0; i < pages; ++i) {
    tables_[dst].push_back(tables_[src][i]);
    ++refs_[tables_[src][i]];
  }
  lengths_[dst] = length;
}

template <typename A>
void Decoder::Run(const kernels::KernelCtx& ctx, int64_t n, std::span<const int32_t> tokens,
                  float* logits, std::span<const int64_t> head_rows) {
  ANVIL_TRACE_ZONE("decoder_run");
  const ModelConfig& cfg = fw_.config;
  Scratch<A>* sp;
  if constexpr (std::is_same_v<A, float>) {
    sp = &scratch_f32_;
  } else {
    sp = &scratch_bf16_;
  }
  Scratch<A>& s = *sp;
  const BlockShape& shape = fw_.shape;
  const int64_t qkv = shape.qkv(), q_cols = shape.q(), kv_cols = shape.kv();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t seq = row_seq_[r];
    const int64_t pos = (r > 0 && row_seq_[r - 1] == seq) ? positions_[r - 1] + 1 : lengths_[seq];
    CHECK_LT(pos, max_len_) << "sequence " << seq << " is full (" << max_len_ << " positions)";
    positions_[r] = static_cast<int32_t>(pos);
  }
  for (int64_t r0 = 0; r0 < n;) {  // pages for each sequence's new positions
    int64_t r1 = r0 + 1;
    while (r1 < n && row_seq_[r1] == row_seq_[r0]) ++r1;
    Reserve(row_seq_[r0], positions_[r0], positions_[r1 - 1] + 1);
    r0 = r1;
  }
  TokenLayout tok;
  tok.n = n;
  tok.positions = positions_.data();
  tok.rope = fw_.rope;
  constexpr DType dt = kActDType<A>;
  const kernels::AttentionDims dims = AttentionDimsOf(shape);
  float* x = s.x;
  float* y = s.y;
  EmbeddingBlockForward(cfg, fw_.w.embed, n, tokens.data(), x, ctx);
  for (int l = 0; l < cfg.n_layers; ++l) {
    const AttentionWeights<A> aw = fw_.Attention<A>(l);
    // The training forward's GEMMs for this layer: FP8 or, kept out of FP8,
    // f32 or bf16; or the caller's (quantized inference) for every layer.
    BlockScratch<A> block = s.block;
    if (!s.site_fp8.empty()) {
      for (int site = 0; site < kLinearSites; ++site) {
        block.linear[site] = &s.site_fp8[l * kLinearSites + site];
      }
    }
    if (!fw_.Fp8Layer(l)) block.SetLinear(s.bf16.get());
    if (linear_ != nullptr) block.SetLinear(linear_);
    AttentionQkvForward(shape, aw, x, s.attn, tok, block, ctx);
    // New k, v rows into the cache. Each row's key lands in HD x NKV lines of
    // its block (one key a line; 256 for small), which the attention then reads:
    // split over the threads, not on one, and roughly as the attention
    // splits the sequences, so most lines are already in the reader's cache.
    auto write_kv = [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r) {
        const A* src = s.attn.qkv + r * qkv + q_cols;
        WriteKv<A>(l, row_seq_[r], positions_[r], src, src + kv_cols);
      }
    };
    if (n >= kParallelKvRows) {
      ctx.pool().ParallelFor(n, write_kv);
    } else {
      write_kv(0, n, 0);
    }
    // A run of rows of a sequence each, all in one parallel region.
    decode_runs_.clear();
    for (auto& ptrs : page_ptrs_) ptrs.clear();
    for (int64_t r0 = 0; r0 < n;) {
      int64_t r1 = r0 + 1;
      while (r1 < n && row_seq_[r1] == row_seq_[r0]) ++r1;
      const int64_t seq = row_seq_[r0];
      decode_runs_.push_back({.pos = positions_[r0],
                              .n = r1 - r0,
                              .q = {s.attn.qkv + r0 * qkv, dt, qkv},
                              .k_cache = CacheIn<A>(l, 0, seq),
                              .v_cache = CacheIn<A>(l, 1, seq),
                              .out = {s.attn.out + r0 * q_cols, dt, 0}});
      r0 = r1;
    }
    kernels::AttentionDecodeBatch(ctx, dims, decode_runs_);
    AttentionOutForward(shape, aw, n, x, s.attn.out, y, ctx, block.Linear(kOutSite));
    MlpBlockForward(shape, fw_.Mlp<A>(l), n, y, x, s.mlp, block, ctx);
  }
  auto head_logits = [&](int64_t rows, const float* in) {
    fw_.WithHead(s.bf16_head, s.head, s.block, [&](const auto& hw, auto head, const auto& scratch) {
      head.logits = logits;
      HeadLogits(cfg, hw, rows, in, head, scratch, ctx, linear_);
    });
  };
  if (head_rows.empty()) {
    head_logits(n, x);
  } else {  // only these rows' logits: gathered into y (free after the layers)
    const int64_t c = cfg.dim;
    for (size_t i = 0; i < head_rows.size(); ++i) {
      std::memcpy(y + static_cast<int64_t>(i) * c, x + head_rows[i] * c, c * sizeof(float));
    }
    head_logits(static_cast<int64_t>(head_rows.size()), y);
  }
  for (int64_t r = 0; r < n; ++r) lengths_[row_seq_[r]] = positions_[r] + 1;
}

void Decoder::Dispatch(const kernels::KernelCtx& ctx, int64_t n, std::span<const int32_t> tokens,
                       float* logits, std::span<const int64_t> head_rows) {
  if (!Bf16Activations(fw_.precision)) {
    Run<float>(ctx, n, tokens, logits, head_rows);
  } else {
    Run<BF16>(ctx, n, tokens, logits, head_rows);
  }
}

void Decoder::Append(const kernels::KernelCtx& ctx, int64_t seq, std::span<const int32_t> tokens,
                     float* logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  CHECK(seq >= 0 && seq < max_seqs_) << "sequence " << seq;
  CHECK(n > 0 && n <= max_rows_) << n << " tokens: the decoder takes 1.." << max_rows_;
  for (int64_t r = 0; r < n; ++r) row_seq_[r] = seq;
  Dispatch(ctx, n, tokens, logits);
}

void Decoder::Prefill(const kernels::KernelCtx& ctx, std::span<const int64_t> seqs,
                      std::span<const std::span<const int32_t>> prompts, float* logits) {
  CHECK_EQ(seqs.size(), prompts.size());
  prefill_tokens_.clear();
  prefill_last_.clear();
  int64_t n = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t seq = seqs[i], len = static_cast<int64_t>(prompts[i].size());
    CHECK(seq >= 0 && seq < max_seqs_) << "sequence " << seq;
    CHECK(len > 0 && n + len <= max_rows_)
        << n + len << " tokens: the decoder takes 1.." << max_rows_ << " a call";
    for (size_t q = 0; q < i; ++q) CHECK_NE(seqs[q], seq) << "a sequence twice in a prefill";
    for (int64_t r = n; r < n + len; ++r) row_seq_[r] = seq;
    prefill_tokens_.insert(prefill_tokens_.end(), prompts[i].begin(), prompts[i].end());
    n += len;
    prefill_last_.push_back(n - 1);
  }
  if (n == 0) return;
  Dispatch(ctx, n, prefill_tokens_, logits, prefill_last_);
}

void Decoder::Step(const kernels::KernelCtx& ctx, std::span<const int32_t> tokens, float* logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  CHECK(n > 0 && n <= max_rows_ && n <= max_seqs_) << n << " sequences";
  std::vector<int64_t>& seqs = step_seqs_;
  seqs.resize(n);
  for (int64_t r = 0; r < n; ++r) seqs[r] = r;
  Step(ctx, seqs, tokens, logits);
}

void Decoder::Step(const kernels::KernelCtx& ctx, std::span<const int64_t> seqs,
                   std::span<const int32_t> tokens, float* logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  CHECK(n > 0 && n <= max_rows_ && n <= max_seqs_ && seqs.size() == tokens.size())
      << n << " tokens for " << seqs.size() << " sequences";
  for (int64_t r = 0; r < n; ++r) {
    CHECK(seqs[r] >= 0 && seqs[r] < max_seqs_) << "sequence " << seqs[r];
    for (int64_t q = 0; q < r; ++q) CHECK_NE(seqs[q], seqs[r]) << "a sequence twice in a step";
    row_seq_[r] = seqs[r];
  }
  Dispatch(ctx, n, tokens, logits);
}

}  // namespace anvil::model
