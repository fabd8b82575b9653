// Llama: the activation store and the step (a stage's forward and backward
// with the recompute policy, evaluation). The blocks hold the math; this file
// only wires buffers and walks the layers, backward mirroring forward.
#include "anvil/model/llama.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

#include "anvil/kernels/attention.h"
#include "anvil/model/embedding_block.h"

namespace anvil::model {

Llama::Llama(const ModelConfig& config, const LlamaOptions& options, const kernels::KernelCtx& ctx)
    : config_(config),
      options_(options),
      shape_(BlockShape::Of(config, options.shard)),
      params_(config, HoldsBf16Weights(options.precision, options.fp8), options.buffers,
              options.shard, options.stage) {
  if (options_.max_seq_len == 0) options_.max_seq_len = config.max_seq_len;
  if (options_.head_chunk_rows == 0) options_.head_chunk_rows = kHeadChunkRows;
  CHECK_GT(options_.max_batch, 0) << "max_batch";
  CHECK_GT(options_.head_chunk_rows, 0) << "head_chunk_rows";
  CHECK_GT(options_.activation_slots, 0) << "activation_slots";
  // A trunk without its head skips the head unit's hooks: one whole model,
  // on one rank, holding its own buffers (PPO's separate critic).
  CHECK(options_.lm_head || (options_.shard.size == 1 && options_.stage.first_layer == 0 &&
                             options_.stage.has_head(config) && options_.buffers.weights &&
                             options_.buffers.grads && options_.activation_slots == 1))
      << "lm_head false needs a whole model on one rank with its own buffers";
  first_layer_ = options_.stage.first_layer;
  end_layer_ = options_.stage.end_layer(config);
  layer_unit_ = first_stage() ? 1 : 0;
  CHECK(options_.max_seq_len > 0 && options_.max_seq_len <= config.max_seq_len)
      << "max_seq_len " << options_.max_seq_len
      << " must be in [1, model.max_seq_len = " << config.max_seq_len << "]";
  CHECK_GE(ctx.scratch_bytes(), kernels::AttentionScratchBytes(AttentionDimsOf(shape_)))
      << "the kernel context's per-thread scratch is too small for attention";
  max_tokens_ = options_.max_batch * options_.max_seq_len;
  const Status buffers = CheckParamBuffers(config, options_.buffers);
  CHECK(buffers.ok()) << buffers.message();
  // Views of the buffers held; the others are bound unit by unit.
  fw_ = ViewOf(params_,
               {.precision = options_.precision,
                .fp8 = options_.fp8,
                .fp8_high_precision_layers = options_.fp8_high_precision_layers},
               ctx, rope_storage_);
  g_.layers.resize(config.n_layers);
  if (params_.has_grads()) g_ = params_.GradView();
  unit_begins_ = UnitBegins(config, options_.shard, options_.stage);

  cu_seqlens_.resize(max_tokens_ + 1);
  positions_.resize(max_tokens_);

  arena_ =
      Arena(static_cast<size_t>(EstimateMemory(config_, options_).activation_bytes), "activations");
  auto allocate = [&](size_t b) { return arena_.Allocate(b); };
  if (!Bf16Activations(options_.precision)) {
    Carve(config_, options_, allocate, store_f32_);
  } else {
    Carve(config_, options_, allocate, store_bf16_);
  }
  if (options_.precision == Precision::kFp8Delayed) {
    // One Fp8Linear per GEMM site of each layer (shared buffers), each with
    // its tensors' histories in fp8_delayed_; each layer its own scratch.
    const Fp8Recipe& r = options_.fp8;
    fp8_delayed_ = std::make_unique<Fp8DelayedScaling>(config.n_layers * kLinearSites,
                                                       r.amax_history, r.amax_most_recent,
                                                       r.forward, r.grad);
    fw_.fp8_delayed = fp8_delayed_.get();
    Store<float>& s = store_f32_;
    s.site_fp8.reserve(static_cast<size_t>(end_layer_ - first_layer_) * kLinearSites);
    for (int l = first_layer_; l < end_layer_; ++l) {
      BlockScratch<float> scratch = s.scratch;
      for (int site = 0; site < kLinearSites; ++site) {
        s.site_fp8.push_back(s.fp8->AtSite(l * kLinearSites + site, fp8_delayed_.get()));
        scratch.linear[site] = &s.site_fp8.back();
      }
      s.layer_scratch.push_back(scratch);
    }
  }
}

LlamaMemory Llama::EstimateMemory(const ModelConfig& config, LlamaOptions options) {
  if (options.max_seq_len == 0) options.max_seq_len = config.max_seq_len;
  if (options.head_chunk_rows == 0) options.head_chunk_rows = kHeadChunkRows;
  LlamaMemory m;
  LlamaParams::Layout(config, &m.param_elements, options.shard, options.stage);
  const bool bf16 = HoldsBf16Weights(options.precision, options.fp8);
  const ParamBuffers& held = options.buffers;
  m.params_bytes =
      m.param_elements *
      static_cast<int64_t>((held.weights ? sizeof(float) + (bf16 ? sizeof(BF16) : 0) : 0) +
                           (held.grads ? sizeof(float) : 0));
  size_t bytes = 0;
  auto count = [&](size_t b) -> std::byte* {
    bytes += AlignUp(b);
    return nullptr;
  };
  if (Bf16Activations(options.precision)) {
    Store<BF16> s;
    Carve(config, options, count, s);
  } else {
    Store<float> s;
    Carve(config, options, count, s);
  }
  m.activation_bytes = static_cast<int64_t>(bytes);
  return m;
}

template <typename Alloc, typename A>
void Llama::Carve(const ModelConfig& config, const LlamaOptions& options, Alloc&& alloc,
                  Store<A>& s) {
  const BlockShape shape = BlockShape::Of(config, options.shard);  // this rank's heads, FFN columns
  const int64_t n = options.max_batch * options.max_seq_len, c = config.dim, f = shape.ffn,
                v = config.vocab_size;
  const int64_t qkv = shape.qkv(), attn = shape.q();
  const int64_t layers = options.stage.end_layer(config) - options.stage.first_layer;
  const bool bf16 = options.precision == Precision::kBF16;
  auto f32 = [&](int64_t count) { return reinterpret_cast<float*>(alloc(count * sizeof(float))); };
  auto act = [&](int64_t count) { return reinterpret_cast<A*>(alloc(count * sizeof(A))); };
  auto bf16s = [&](int64_t count) { return reinterpret_cast<BF16*>(alloc(count * sizeof(BF16))); };
  auto new_attn = [&] {
    return AttentionSaved<A>{f32(n), act(n * c), act(n * qkv), act(n * attn), f32(shape.heads * n)};
  };
  // What the backward recomputes (full: every layer's saved activations;
  // selective: SwiGLU's output) is rebuilt just before its use, so one copy
  // serves every layer and every slot.
  const Recompute policy = options.recompute;
  s.slots.resize(options.activation_slots);
  for (size_t k = 0; k < s.slots.size(); ++k) {
    Slot<A>& slot = s.slots[k];
    const Slot<A>* shared = k == 0 ? nullptr : &s.slots[0];
    slot.resid.resize(2 * layers + 1);
    for (float*& r : slot.resid) r = f32(n * c);
    slot.attn.resize(layers);
    slot.mlp.resize(layers);
    for (int64_t l = 0; l < layers; ++l) {
      const bool own = policy != Recompute::kFull || (l == 0 && shared == nullptr);
      const int64_t from = policy == Recompute::kFull ? 0 : l;  // where a shared copy lives
      if (own) {
        slot.attn[l] = new_attn();
        slot.mlp[l].rstd = f32(n);
        slot.mlp[l].xn = act(n * c);
        slot.mlp[l].gate_up = act(n * 2 * f);
      } else {
        const Slot<A>& owner = shared != nullptr ? *shared : slot;
        slot.attn[l] = owner.attn[from];
        slot.mlp[l] = owner.mlp[from];
      }
      const bool own_h = policy == Recompute::kNone || (l == 0 && shared == nullptr);
      slot.mlp[l].h = own_h ? act(n * f) : (shared != nullptr ? *shared : slot).mlp[0].h;
    }
    slot.d_resid = f32(n * c);
  }
  const bool kept_bf16 = KeptInBf16(options.precision, options.fp8);
  if (options.stage.has_head(config) && options.lm_head) {
    const int64_t chunk = std::min(n, options.head_chunk_rows);  // the head's logits rows
    if (kept_bf16) {  // its scratch's dxn is the blocks' (below)
      s.bf16_head = Bf16Head{
          .saved = {f32(n), bf16s(n * c), f32(chunk * v), f32(n), f32(n), bf16s(chunk * v)},
          .scratch = {.norm_f32 = f32(n * c)}};
    } else {
      s.head = {f32(n), act(n * c), f32(chunk * v), f32(n), f32(n), nullptr};
      if (bf16) s.head.dlogits_act = act(chunk * v);
    }
  }
  if (IsFp8(options.precision))
    s.fp8 = MakeFp8Linear(options.precision, options.fp8, shape, n, alloc);
  s.scratch = {bf16 ? f32(n * c) : nullptr,
               bf16 ? act(n * c) : nullptr,
               f32(n * c),
               f32(n * attn),
               f32(n * qkv),
               bf16 ? act(n * qkv) : nullptr,
               act(n * f),
               act(n * 2 * f)};
  s.scratch.SetLinear(s.fp8.get());
  if (s.bf16_head) s.bf16_head->scratch.dxn = s.scratch.dxn;
  if (kept_bf16 && options.fp8_high_precision_layers > 0) {
    s.bf16 = MakeBf16Linear(shape, n, alloc);
  }
  s.scratch_kept = s.scratch;
  s.scratch_kept.SetLinear(s.bf16.get());
}

template <typename A>
const BlockScratch<A>& Llama::LayerScratch(const Store<A>& s, int layer) const {
  if (!fw_.Fp8Layer(layer)) return s.scratch_kept;
  return s.layer_scratch.empty() ? s.scratch : s.layer_scratch[layer - first_layer_];
}

template <>
Llama::Store<float>& Llama::store<float>() {
  return store_f32_;
}
template <>
Llama::Store<BF16>& Llama::store<BF16>() {
  return store_bf16_;
}

void Llama::InitWeights(const kernels::KernelCtx& ctx, uint64_t seed) {
  CHECK(params_.has_weights()) << "InitWeights of a model that holds no whole weights";
  params_.Init(ctx, seed);
}

std::vector<int64_t> Llama::UnitBegins(const ModelConfig& config, const ShardInfo& shard,
                                       const StageRange& stage) {
  int64_t size = 0;
  const std::vector<ParamInfo> layout = LlamaParams::Layout(config, &size, shard, stage);
  // The layout is in unit order; the embedding is a unit, a layer starts at
  // its attention norm, the head at the final norm.
  std::vector<int64_t> begins;
  for (const ParamInfo& p : layout) {
    if (p.kind == ParamKind::kEmbed || p.kind == ParamKind::kAttnNorm ||
        p.kind == ParamKind::kFinalNorm) {
      begins.push_back(p.offset);
    }
  }
  begins.push_back(size);
  return begins;
}

int64_t Llama::unit_begin(int unit) const {
  CHECK(unit >= 0 && unit <= num_units()) << "unit " << unit;
  return unit_begins_[unit];
}

void Llama::BindUnitWeights(int unit, const float* weights, const BF16* bf16) {
  const int64_t begin = unit_begin(unit), end = unit_begin(unit + 1);
  for (const ParamInfo& p : params_.params()) {
    if (p.offset < begin || p.offset >= end) continue;
    SetViewPointer(fw_.w, p, weights + (p.offset - begin));
    if (bf16 != nullptr) SetViewPointer(fw_.wb, p, bf16 + (p.offset - begin));
  }
}

void Llama::BindUnitGrads(int unit, float* grads) {
  const int64_t begin = unit_begin(unit), end = unit_begin(unit + 1);
  for (const ParamInfo& p : params_.params()) {
    if (p.offset >= begin && p.offset < end) SetViewPointer(g_, p, grads + (p.offset - begin));
  }
}

TokenLayout Llama::Layout(const Batch& batch) {
  const int64_t n = batch.n();
  CHECK(n > 0 && n <= max_tokens_)
      << "batch of " << batch.rows << " x " << batch.seq_len
      << " tokens exceeds the model's max_batch x max_seq_len = " << max_tokens_;
  CHECK_EQ(static_cast<int64_t>(batch.tokens.size()), n) << "batch.tokens";
  TokenLayout tok;
  tok.n = n;
  tok.rope = fw_.rope;
  if (batch.cu_seqlens.empty()) {
    CHECK(batch.positions.empty()) << "positions without cu_seqlens";
    CHECK_LE(batch.seq_len, config_.max_seq_len) << "seq_len beyond model.max_seq_len";
    for (int64_t b = 0; b <= batch.rows; ++b)
      cu_seqlens_[b] = static_cast<int32_t>(b * batch.seq_len);
    for (int64_t t = 0; t < n; ++t) positions_[t] = static_cast<int32_t>(t % batch.seq_len);
    tok.cu_seqlens = std::span<const int32_t>(cu_seqlens_.data(), batch.rows + 1);
    tok.positions = positions_.data();
  } else {
    CHECK_EQ(static_cast<int64_t>(batch.positions.size()), n) << "batch.positions";
    CHECK(batch.cu_seqlens.front() == 0 && batch.cu_seqlens.back() == n)
        << "cu_seqlens must run from 0 to N = " << n;
    tok.cu_seqlens = batch.cu_seqlens;
    tok.positions = batch.positions.data();
  }
  return tok;
}

namespace {

// The hooks, each optional.
struct Hooks {
  const StepHooks& h;
  void BeforeForward(int unit) const {
    if (h.before_forward) h.before_forward(unit);
  }
  void BeforeBackward(int unit) const {
    if (h.before_backward) h.before_backward(unit);
  }
  void GradsReady(int64_t from) const {
    if (h.grads_ready) h.grads_ready(from);
  }
  bool probing() const { return static_cast<bool>(h.probe); }
  void Probe(const std::string& name, float* x, int64_t n) const {
    if (h.probe) h.probe(name, x, n);
  }
  void HeadInput(const float* x, float* dx, int64_t n) const {
    if (h.head_input) h.head_input(x, dx, n);
  }
};

}  // namespace

template <typename A>
LossStats Llama::Evaluate(const kernels::KernelCtx& ctx, const Batch& batch, float* logits_out,
                          const StepHooks& step_hooks) {
  CHECK(first_stage() && last_stage())
      << "evaluation of a pipeline stage is not implemented (it needs the schedule)";
  const Hooks hooks{step_hooks};
  const TokenLayout tok = Layout(batch);
  const int64_t n = tok.n;
  Store<A>& s = store<A>();
  Slot<A>& slot = s.slots[0];
  hooks.BeforeForward(0);
  EmbeddingBlockForward(config_, fw_.w.embed, n, batch.tokens.data(), slot.resid[0], ctx);
  // Layer 0's buffers for every layer, the residual stream ping-ponging.
  float* x = slot.resid[0];
  float* y = slot.resid[1];
  for (int l = first_layer_; l < end_layer_; ++l) {
    hooks.BeforeForward(layer_unit_ + l - first_layer_);
    AttentionBlockForward(shape_, fw_.Attention<A>(l), x, y, slot.attn[0], tok, LayerScratch(s, l),
                          ctx);
    MlpBlockForward(shape_, fw_.Mlp<A>(l), n, y, x, slot.mlp[0], LayerScratch(s, l), ctx);
  }
  hooks.HeadInput(x, nullptr, n);
  if (!options_.lm_head) {
    CHECK(logits_out == nullptr) << "Logits of a model built without its LM head (lm_head false)";
    return {};
  }
  hooks.BeforeForward(num_units() - 1);
  if (logits_out != nullptr) {  // straight into the caller's [N, V]
    fw_.WithHead(s.bf16_head, s.head, s.scratch,
                 [&](const auto& hw, auto head, const auto& scratch) {
                   head.logits = logits_out;
                   HeadLogits(config_, hw, n, x, head, scratch, ctx);
                 });
    return {};
  }
  CHECK_EQ(static_cast<int64_t>(batch.targets.size()), n) << "targets";
  const auto xs = fw_.WithHead(s.bf16_head, s.head, s.scratch,
                               [&](const auto& hw, const auto& head, const auto& scratch) {
                                 return HeadLoss(config_, hw, n, options_.head_chunk_rows, x,
                                                 batch.targets.data(), head, scratch, ctx);
                               });
  return {xs.loss_sum, xs.valid_rows};
}

template <typename A>
LossStats Llama::RunForward(const kernels::KernelCtx& ctx, int slot_index, const Batch& batch,
                            float loss_scale, const StepHooks& step_hooks) {
  const Hooks hooks{step_hooks};
  const TokenLayout tok = Layout(batch);
  const int64_t n = tok.n;
  Store<A>& s = store<A>();
  Slot<A>& slot = s.slots[slot_index];
  const int64_t nc = n * config_.dim;
  if (first_stage()) {
    hooks.BeforeForward(0);
    EmbeddingBlockForward(config_, fw_.w.embed, n, batch.tokens.data(), slot.resid[0], ctx);
    hooks.Probe("embed", slot.resid[0], nc);
  }
  for (int l = first_layer_; l < end_layer_; ++l) {
    const int i = l - first_layer_;
    hooks.BeforeForward(layer_unit_ + i);
    AttentionBlockForward(shape_, fw_.Attention<A>(l), slot.resid[2 * i], slot.resid[2 * i + 1],
                          slot.attn[i], tok, LayerScratch(s, l), ctx);
    if (hooks.probing())
      hooks.Probe(fmt::format("layers.{}.attn_out", l), slot.resid[2 * i + 1], nc);
    MlpBlockForward(shape_, fw_.Mlp<A>(l), n, slot.resid[2 * i + 1], slot.resid[2 * i + 2],
                    slot.mlp[i], LayerScratch(s, l), ctx);
    if (hooks.probing())
      hooks.Probe(fmt::format("layers.{}.mlp_out", l), slot.resid[2 * i + 2], nc);
  }
  if (!last_stage()) return {};
  const int head_unit = num_units() - 1;
  if (!options_.lm_head) {  // the caller's head alone gives the trunk its gradient
    CHECK(step_hooks.head_input) << "a model without its LM head trains from StepHooks::head_input";
    std::fill_n(slot.d_resid, nc, 0.0f);
    hooks.HeadInput(slot.resid.back(), slot.d_resid, n);
    hooks.Probe("head.d_in", slot.d_resid, nc);
    hooks.GradsReady(unit_begins_[head_unit]);
    return {};
  }
  const int32_t* targets = batch.targets.data();
  CHECK_EQ(static_cast<int64_t>(batch.targets.size()), n) << "targets";
  if (loss_scale <= 0.0f) {
    const auto valid =
        std::count_if(targets, targets + n, [](int32_t t) { return t != kIgnoreIndex; });
    loss_scale = valid > 0 ? static_cast<float>(1.0 / static_cast<double>(valid)) : 0.0f;
  }
  // The head's loss and its backward together, a chunk of rows at a time (the
  // [N, V] logits are never whole), leaving the grad of its input in the
  // slot's d_resid for the layers' backward.
  hooks.BeforeForward(head_unit);
  hooks.BeforeBackward(head_unit);
  CHECK(batch.loss_weights.empty() || static_cast<int64_t>(batch.loss_weights.size()) == n)
      << "batch.loss_weights holds " << batch.loss_weights.size() << " values for " << n << " rows";
  const auto xs = fw_.WithHead(
      s.bf16_head, s.head, s.scratch, [&](const auto& hw, const auto& head, const auto& scratch) {
        return HeadForwardBackward(
            config_, hw, n, options_.head_chunk_rows, slot.resid.back(), targets, loss_scale,
            batch.loss_weights.empty() ? nullptr : batch.loss_weights.data(), head, slot.d_resid,
            HeadGrads{g_.final_norm, g_.lm_head}, scratch, ctx);
      });
  hooks.HeadInput(slot.resid.back(), slot.d_resid, n);
  hooks.Probe("head.d_in", slot.d_resid, nc);
  hooks.GradsReady(unit_begins_[head_unit]);
  return {xs.loss_sum, xs.valid_rows};
}

template <typename A>
void Llama::RunBackward(const kernels::KernelCtx& ctx, int slot_index, const Batch& batch,
                        const StepHooks& step_hooks) {
  const Hooks hooks{step_hooks};
  const TokenLayout tok = Layout(batch);
  const int64_t n = tok.n;
  Store<A>& s = store<A>();
  Slot<A>& slot = s.slots[slot_index];
  // The forward's mirror image, layer by layer from the last.
  for (int l = end_layer_ - 1; l >= first_layer_; --l) {
    const int i = l - first_layer_;
    hooks.BeforeBackward(layer_unit_ + i);
    const AttentionWeights<A> aw = fw_.Attention<A>(l);
    const MlpWeights<A> mw = fw_.Mlp<A>(l);
    const BlockScratch<A>& scratch = LayerScratch(s, l);
    if (options_.recompute == Recompute::kFull) {
      AttentionBlockForward(shape_, aw, slot.resid[2 * i], nullptr, slot.attn[i], tok, scratch,
                            ctx);
      MlpBlockForward(shape_, mw, n, slot.resid[2 * i + 1], nullptr, slot.mlp[i], scratch, ctx);
    } else if (options_.recompute == Recompute::kSelective) {
      MlpRecomputeH(shape_, n, slot.mlp[i], ctx);
    }
    const LayerView<float>& gl = g_.layers[l];
    MlpBlockBackward(shape_, mw, n, slot.resid[2 * i + 1], slot.mlp[i], slot.d_resid,
                     MlpGrads{gl.mlp_norm, gl.w_gate_up, gl.w_down}, scratch, ctx);
    if (hooks.probing())
      hooks.Probe(fmt::format("layers.{}.mlp.d_in", l), slot.d_resid, n * config_.dim);
    AttentionBlockBackward(shape_, aw, slot.resid[2 * i], slot.attn[i], slot.d_resid,
                           AttentionGrads{gl.attn_norm, gl.wqkv, gl.wo}, tok, scratch, ctx);
    if (hooks.probing())
      hooks.Probe(fmt::format("layers.{}.attn.d_in", l), slot.d_resid, n * config_.dim);
    hooks.GradsReady(unit_begins_[layer_unit_ + i]);
  }
  if (first_stage()) {
    hooks.BeforeBackward(0);
    EmbeddingBlockBackward(config_, n, batch.tokens.data(), slot.d_resid, g_.embed, ctx);
    hooks.GradsReady(0);
  }
}

LossStats Llama::StageForward(const kernels::KernelCtx& ctx, int slot, const Batch& batch,
                              float loss_scale, const StepHooks& hooks) {
  CHECK(slot >= 0 && slot < options_.activation_slots) << "activation slot " << slot;
  return !Bf16Activations(options_.precision)
             ? RunForward<float>(ctx, slot, batch, loss_scale, hooks)
             : RunForward<BF16>(ctx, slot, batch, loss_scale, hooks);
}

void Llama::StageBackward(const kernels::KernelCtx& ctx, int slot, const Batch& batch,
                          const StepHooks& hooks) {
  CHECK(slot >= 0 && slot < options_.activation_slots) << "activation slot " << slot;
  if (!Bf16Activations(options_.precision)) {
    RunBackward<float>(ctx, slot, batch, hooks);
  } else {
    RunBackward<BF16>(ctx, slot, batch, hooks);
  }
}

LossStats Llama::ForwardBackward(const kernels::KernelCtx& ctx, const Batch& batch,
                                 float loss_scale, const StepHooks& hooks) {
  CHECK(first_stage() && last_stage()) << "ForwardBackward of a pipeline stage: use StageForward "
                                          "and StageBackward";
  const LossStats stats = StageForward(ctx, 0, batch, loss_scale, hooks);
  StageBackward(ctx, 0, batch, hooks);
  return stats;
}

LossStats Llama::Forward(const kernels::KernelCtx& ctx, const Batch& batch,
                         const StepHooks& hooks) {
  return !Bf16Activations(options_.precision) ? Evaluate<float>(ctx, batch, nullptr, hooks)
                                              : Evaluate<BF16>(ctx, batch, nullptr, hooks);
}

void Llama::Logits(const kernels::KernelCtx& ctx, const Batch& batch, float* logits,
                   const StepHooks& hooks) {
  CHECK(logits != nullptr);
  if (!Bf16Activations(options_.precision)) {
    Evaluate<float>(ctx, batch, logits, hooks);
  } else {
    Evaluate<BF16>(ctx, batch, logits, hooks);
  }
}

float* Llama::SlotBuffer(int slot, SlotPart which) {
  CHECK(slot >= 0 && slot < options_.activation_slots) << "activation slot " << slot;
  // The residual stream and its grad are f32 in either precision.
  auto pick = [&](auto& store) -> float* {
    auto& s = store.slots[slot];
    return which == SlotPart::kInput    ? s.resid.front()
           : which == SlotPart::kOutput ? s.resid.back()
                                        : s.d_resid;
  };
  return !Bf16Activations(options_.precision) ? pick(store_f32_) : pick(store_bf16_);
}

float* Llama::stage_input(int slot) {
  CHECK(!first_stage()) << "the first stage embeds its tokens: it takes no input";
  return SlotBuffer(slot, SlotPart::kInput);
}

const float* Llama::stage_output(int slot) {
  CHECK(!last_stage()) << "the last stage ends in the loss: it has no output";
  return SlotBuffer(slot, SlotPart::kOutput);
}

float* Llama::stage_output_grad(int slot) { return SlotBuffer(slot, SlotPart::kGrad); }

}  // namespace anvil::model
