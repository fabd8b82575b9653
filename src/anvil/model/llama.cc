// Llama: the activation store and the step (forward, backward with the
// recompute policy, evaluation). The blocks hold the math; this file only
// wires buffers and walks the layers, backward mirroring forward.
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
      params_(config, options.precision == Precision::kBF16, options.buffers, options.shard) {
  if (options_.max_seq_len == 0) options_.max_seq_len = config.max_seq_len;
  if (options_.head_chunk_rows == 0) options_.head_chunk_rows = kHeadChunkRows;
  CHECK_GT(options_.max_batch, 0) << "max_batch";
  CHECK_GT(options_.head_chunk_rows, 0) << "head_chunk_rows";
  CHECK(options_.max_seq_len > 0 && options_.max_seq_len <= config.max_seq_len)
      << "max_seq_len " << options_.max_seq_len
      << " must be in [1, model.max_seq_len = " << config.max_seq_len << "]";
  CHECK_GE(ctx.scratch_bytes(), kernels::AttentionScratchBytes(AttentionDimsOf(shape_)))
      << "the kernel context's per-thread scratch is too small for attention";
  max_tokens_ = options_.max_batch * options_.max_seq_len;
  CHECK(!config.tie_embeddings || (options_.buffers.weights && options_.buffers.grads))
      << "a model with tied embeddings holds whole weights and grads (the LM head is the "
         "embedding: one tensor in two units)";
  // Views of the buffers held; the others are bound unit by unit.
  w_.layers.resize(config.n_layers);
  wb_.layers.resize(config.n_layers);
  g_.layers.resize(config.n_layers);
  if (params_.has_weights()) w_ = params_.View(static_cast<const float*>(params_.weights().data()));
  if (params_.has_grads()) g_ = params_.GradView();
  if (params_.has_bf16()) wb_ = params_.View(static_cast<const BF16*>(params_.bf16().data()));
  unit_begins_ = UnitBegins(config, options_.shard);

  rope_storage_ = AlignedBuffer(kernels::RopeTableFloats(config.max_seq_len, config.head_dim()) *
                                sizeof(float));
  rope_ = kernels::RopeBuildTable(ctx, config.max_seq_len, config.head_dim(), config.rope_theta,
                                  reinterpret_cast<float*>(rope_storage_.data()));
  cu_seqlens_.resize(max_tokens_ + 1);
  positions_.resize(max_tokens_);

  arena_ =
      Arena(static_cast<size_t>(EstimateMemory(config_, options_).activation_bytes), "activations");
  auto allocate = [&](size_t b) { return arena_.Allocate(b); };
  if (options_.precision == Precision::kF32) {
    Carve(config_, options_, allocate, store_f32_);
  } else {
    Carve(config_, options_, allocate, store_bf16_);
  }
}

LlamaMemory Llama::EstimateMemory(const ModelConfig& config, LlamaOptions options) {
  if (options.max_seq_len == 0) options.max_seq_len = config.max_seq_len;
  if (options.head_chunk_rows == 0) options.head_chunk_rows = kHeadChunkRows;
  LlamaMemory m;
  LlamaParams::Layout(config, &m.param_elements, options.shard);
  const bool bf16 = options.precision == Precision::kBF16;
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
  if (bf16) {
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
  const int64_t layers = config.n_layers;
  const bool bf16 = options.precision == Precision::kBF16;
  auto f32 = [&](int64_t count) { return reinterpret_cast<float*>(alloc(count * sizeof(float))); };
  auto act = [&](int64_t count) { return reinterpret_cast<A*>(alloc(count * sizeof(A))); };
  auto new_attn = [&] {
    return AttentionSaved<A>{f32(n), act(n * c), act(n * qkv), act(n * attn), f32(shape.heads * n)};
  };
  s.resid.resize(2 * layers + 1);
  for (float*& r : s.resid) r = f32(n * c);
  s.attn.resize(layers);
  s.mlp.resize(layers);
  const Recompute policy = options.recompute;
  for (int64_t l = 0; l < layers; ++l) {
    const bool own = policy != Recompute::kFull || l == 0;
    s.attn[l] = own ? new_attn() : s.attn[0];
    if (own) {
      s.mlp[l].rstd = f32(n);
      s.mlp[l].xn = act(n * c);
      s.mlp[l].gate_up = act(n * 2 * f);
    } else {
      s.mlp[l] = s.mlp[0];
    }
    s.mlp[l].h = (policy == Recompute::kNone || l == 0) ? act(n * f) : s.mlp[0].h;
  }
  const int64_t chunk = std::min(n, options.head_chunk_rows);  // the head's logits rows
  s.head = {f32(n), act(n * c), f32(chunk * v), f32(n), f32(n), bf16 ? act(chunk * v) : nullptr};
  s.scratch = {bf16 ? f32(n * c) : nullptr,
               bf16 ? act(n * c) : nullptr,
               f32(n * c),
               f32(n * attn),
               f32(n * qkv),
               bf16 ? act(n * qkv) : nullptr,
               act(n * f),
               act(n * 2 * f)};
  s.d_resid = f32(n * c);
}

template <>
Llama::Store<float>& Llama::store<float>() {
  return store_f32_;
}
template <>
Llama::Store<BF16>& Llama::store<BF16>() {
  return store_bf16_;
}

template <>
AttentionWeights<float> Llama::AttentionWeightsOf<float>(int l) const {
  return {w_.layers[l].attn_norm, w_.layers[l].wqkv, w_.layers[l].wo};
}
template <>
AttentionWeights<BF16> Llama::AttentionWeightsOf<BF16>(int l) const {
  return {w_.layers[l].attn_norm, wb_.layers[l].wqkv, wb_.layers[l].wo};
}
template <>
MlpWeights<float> Llama::MlpWeightsOf<float>(int l) const {
  return {w_.layers[l].mlp_norm, w_.layers[l].w_gate_up, w_.layers[l].w_down};
}
template <>
MlpWeights<BF16> Llama::MlpWeightsOf<BF16>(int l) const {
  return {w_.layers[l].mlp_norm, wb_.layers[l].w_gate_up, wb_.layers[l].w_down};
}
template <>
HeadWeights<float> Llama::HeadWeightsOf<float>() const {
  return {w_.final_norm, w_.lm_head};
}
template <>
HeadWeights<BF16> Llama::HeadWeightsOf<BF16>() const {
  return {w_.final_norm, wb_.lm_head};
}

void Llama::InitWeights(const kernels::KernelCtx& ctx, uint64_t seed) {
  CHECK(params_.has_weights()) << "InitWeights of a model that holds no whole weights";
  params_.Init(ctx, seed);
}

std::vector<int64_t> Llama::UnitBegins(const ModelConfig& config, const ShardInfo& shard) {
  int64_t size = 0;
  const std::vector<ParamInfo> layout = LlamaParams::Layout(config, &size, shard);
  // The layout is in unit order; a layer starts at its attention norm, the
  // head at the final norm.
  std::vector<int64_t> begins = {0};
  for (const ParamInfo& p : layout) {
    if (p.kind == ParamKind::kAttnNorm || p.kind == ParamKind::kFinalNorm)
      begins.push_back(p.offset);
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
    SetViewPointer(w_, p, weights + (p.offset - begin));
    if (bf16 != nullptr) SetViewPointer(wb_, p, bf16 + (p.offset - begin));
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
  tok.rope = rope_;
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

template <typename A>
LossStats Llama::Run(const kernels::KernelCtx& ctx, const Batch& batch, bool backward,
                     float loss_scale, float* logits_out, const StepHooks& hooks) {
  const int head_unit = num_units() - 1;
  auto before_forward = [&](int unit) {
    if (hooks.before_forward) hooks.before_forward(unit);
  };
  auto before_backward = [&](int unit) {
    if (hooks.before_backward) hooks.before_backward(unit);
  };
  auto grads_ready = [&](int64_t from) {
    if (hooks.grads_ready) hooks.grads_ready(from);
  };
  const TokenLayout tok = Layout(batch);
  const int64_t n = tok.n;
  const int layers = static_cast<int>(config_.n_layers);
  const int32_t* targets = batch.targets.data();
  if (logits_out == nullptr) CHECK_EQ(static_cast<int64_t>(batch.targets.size()), n) << "targets";
  Store<A>& s = store<A>();
  before_forward(0);
  EmbeddingBlockForward(config_, w_.embed, n, batch.tokens.data(), s.resid[0], ctx);

  if (!backward) {  // Evaluation: layer 0's buffers for every layer, residual ping-pong.
    float* x = s.resid[0];
    float* y = s.resid[1];
    for (int l = 0; l < layers; ++l) {
      before_forward(1 + l);
      AttentionBlockForward(shape_, AttentionWeightsOf<A>(l), x, y, s.attn[0], tok, s.scratch, ctx);
      MlpBlockForward(shape_, MlpWeightsOf<A>(l), n, y, x, s.mlp[0], s.scratch, ctx);
    }
    before_forward(head_unit);
    const HeadWeights<A> hw = HeadWeightsOf<A>();
    if (logits_out != nullptr) {  // straight into the caller's [N, V]
      HeadSaved<A> head = s.head;
      head.logits = logits_out;
      HeadLogits(config_, hw, n, x, head, s.scratch, ctx);
      return {};
    }
    const auto xs =
        HeadLoss(config_, hw, n, options_.head_chunk_rows, x, targets, s.head, s.scratch, ctx);
    return {xs.loss_sum, xs.valid_rows};
  }

  for (int l = 0; l < layers; ++l) {
    before_forward(1 + l);
    AttentionBlockForward(shape_, AttentionWeightsOf<A>(l), s.resid[2 * l], s.resid[2 * l + 1],
                          s.attn[l], tok, s.scratch, ctx);
    MlpBlockForward(shape_, MlpWeightsOf<A>(l), n, s.resid[2 * l + 1], s.resid[2 * l + 2], s.mlp[l],
                    s.scratch, ctx);
  }
  if (loss_scale <= 0.0f) {
    const auto valid =
        std::count_if(targets, targets + n, [](int32_t t) { return t != kIgnoreIndex; });
    loss_scale = valid > 0 ? static_cast<float>(1.0 / static_cast<double>(valid)) : 0.0f;
  }
  // The head's loss and its backward together, a chunk of rows at a time (the
  // [N, V] logits are never whole); then the layers' backward, the forward's
  // mirror image.
  before_forward(head_unit);
  before_backward(head_unit);
  const HeadWeights<A> hw = HeadWeightsOf<A>();
  const auto xs = HeadForwardBackward(config_, hw, n, options_.head_chunk_rows, s.resid[2 * layers],
                                      targets, loss_scale, s.head, s.d_resid,
                                      HeadGrads{g_.final_norm, g_.lm_head}, s.scratch, ctx);
  grads_ready(unit_begins_[head_unit]);
  for (int l = layers - 1; l >= 0; --l) {
    before_backward(1 + l);
    const AttentionWeights<A> aw = AttentionWeightsOf<A>(l);
    const MlpWeights<A> mw = MlpWeightsOf<A>(l);
    if (options_.recompute == Recompute::kFull) {
      AttentionBlockForward(shape_, aw, s.resid[2 * l], nullptr, s.attn[l], tok, s.scratch, ctx);
      MlpBlockForward(shape_, mw, n, s.resid[2 * l + 1], nullptr, s.mlp[l], s.scratch, ctx);
    } else if (options_.recompute == Recompute::kSelective) {
      MlpRecomputeH(shape_, n, s.mlp[l], ctx);
    }
    const LayerView<float>& gl = g_.layers[l];
    MlpBlockBackward(shape_, mw, n, s.resid[2 * l + 1], s.mlp[l], s.d_resid,
                     MlpGrads{gl.mlp_norm, gl.w_gate_up, gl.w_down}, s.scratch, ctx);
    AttentionBlockBackward(shape_, aw, s.resid[2 * l], s.attn[l], s.d_resid,
                           AttentionGrads{gl.attn_norm, gl.wqkv, gl.wo}, tok, s.scratch, ctx);
    grads_ready(unit_begins_[1 + l]);
  }
  before_backward(0);
  EmbeddingBlockBackward(config_, n, batch.tokens.data(), s.d_resid, g_.embed, ctx);
  grads_ready(0);
  return {xs.loss_sum, xs.valid_rows};
}

LossStats Llama::ForwardBackward(const kernels::KernelCtx& ctx, const Batch& batch,
                                 float loss_scale, const StepHooks& hooks) {
  return options_.precision == Precision::kF32
             ? Run<float>(ctx, batch, true, loss_scale, nullptr, hooks)
             : Run<BF16>(ctx, batch, true, loss_scale, nullptr, hooks);
}

LossStats Llama::Forward(const kernels::KernelCtx& ctx, const Batch& batch,
                         const StepHooks& hooks) {
  return options_.precision == Precision::kF32 ? Run<float>(ctx, batch, false, 0.0f, nullptr, hooks)
                                               : Run<BF16>(ctx, batch, false, 0.0f, nullptr, hooks);
}

void Llama::Logits(const kernels::KernelCtx& ctx, const Batch& batch, float* logits) {
  CHECK(logits != nullptr);
  if (options_.precision == Precision::kF32) {
    Run<float>(ctx, batch, false, 0.0f, logits, {});
  } else {
    Run<BF16>(ctx, batch, false, 0.0f, logits, {});
  }
}

}  // namespace anvil::model
