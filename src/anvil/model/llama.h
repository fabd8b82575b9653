// The Llama model for training: embedding, L x (attention block, MLP block),
// final norm + LM head + cross-entropy, each with an explicit backward.
// Parameters live in LlamaParams' flat buffers; activations in one arena sized
// from config x (max B, max T) at construction, so a step allocates nothing.
// Parameter grads accumulate (+=): gradient accumulation is repeated calls.
//
// Precision: f32 runs everything in f32. bf16 feeds GEMMs and attention bf16
// operands (the bf16 weight shadow, bf16 activations/activation grads at GEMM
// inputs) with f32 accumulation; norms, softmax, the residual stream and its
// grad, the loss and every parameter grad stay f32.
// Recompute: none keeps every activation backward reads; selective drops the
// SwiGLU output h (rebuilt from gate_up; attention probabilities are never
// stored in any mode: FlashAttention recomputes them); full keeps only each
// block's input (the residual stream) and re-runs the layer's forward in
// backward. All three give bitwise the same losses and grads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/arena.h"
#include "anvil/kernels/ctx.h"
#include "anvil/kernels/rope.h"
#include "anvil/model/attention_block.h"
#include "anvil/model/bf16_linear.h"
#include "anvil/model/config.h"
#include "anvil/model/forward_weights.h"
#include "anvil/model/fp8_linear.h"
#include "anvil/model/head_block.h"
#include "anvil/model/mlp_block.h"
#include "anvil/model/weights.h"

namespace anvil::model {

// A micro-batch of B rows of T tokens, flattened to N = B*T token rows.
// Fixed windows: leave cu_seqlens and positions empty (each row is one
// sequence at positions 0..T-1). Packed documents: cu_seqlens [docs + 1]
// (FA2 style over the N flattened rows; 0 first, N last; documents may cross
// rows) and positions [N] (RoPE position of each token, restarting per document).
struct Batch {
  int64_t rows = 0;                     // B
  int64_t seq_len = 0;                  // T
  std::span<const int32_t> tokens = {};      // [N] input ids
  std::span<const int32_t> targets = {};     // [N] next-token ids, kIgnoreIndex = no loss
  std::span<const int32_t> cu_seqlens = {};  // [docs + 1] or empty
  std::span<const int32_t> positions = {};   // [N] or empty
  // [N] or empty: row t's loss enters the gradient times loss_weights[t]
  // (RL's per-token policy-gradient coefficients); the reported loss is the
  // plain cross-entropy.
  std::span<const float> loss_weights = {};
  int64_t n() const { return rows * seq_len; }
};

// Called during backward: grads in [from, end of the flat buffer) are final.
using GradsReady = std::function<void(int64_t from)>;

// What a step tells its caller as it walks the model's units (Llama's
// num_units: the embedding, each layer, the head). Data parallelism hooks in
// here; every hook may be empty.
struct StepHooks {
  // Grads in [from, end of the flat layout) are final for this call; called
  // after the head's, each layer's and the embedding's backward, ending at 0.
  GradsReady grads_ready = nullptr;
  // The unit's forward (or, for the head, its fused forward and backward) is
  // next: its weights must be in place (BindUnitWeights under ZeRO-3).
  std::function<void(int unit)> before_forward = nullptr;
  // The unit's backward is next: its weights and zeroed grads must be in
  // place (BindUnitGrads under ZeRO-2/3).
  std::function<void(int unit)> before_backward = nullptr;
  // The numerics probe: called with each activation of the residual stream
  // as the forward makes it ("embed", "layers.L.attn_out", "layers.L.mlp_out")
  // and each of its grads as the backward makes it ("head.d_in",
  // "layers.L.mlp.d_in", "layers.L.attn.d_in"), [n] f32 values, in execution
  // order. The values may be changed (a test plants a fault this way).
  std::function<void(const std::string& name, float* x, int64_t n)> probe = nullptr;
  // A head of the caller's that reads the LM head's input, the final residual
  // stream x [n, C] (f32), as features (PPO's value head, rl/value_head.h).
  // Evaluation calls it as the forward reaches the head, dx null; training
  // once, with x and its grad dx [n, C] right after the LM head's backward
  // wrote it, so the caller adds its own head's grad and the trunk learns
  // from both. The step's loss_scale is not applied to what the caller adds:
  // it adds the gradient of its own loss, scaled as it means it.
  std::function<void(const float* x, float* dx, int64_t n)> head_input = nullptr;
};

struct LossStats {
  double loss_sum = 0;  // sum of per-token cross-entropy over counted targets
  int64_t tokens = 0;   // targets that are not kIgnoreIndex
  double mean() const { return tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0; }
};

struct LlamaOptions {
  Precision precision = Precision::kF32;
  Recompute recompute = Recompute::kNone;
  int64_t max_batch = 1;    // most rows B of a call
  int64_t max_seq_len = 0;  // most tokens T per row; 0 = config.max_seq_len
  // Rows of [rows, V] logits the head holds at once (head_block.h); 0:
  // kHeadChunkRows. Otherwise a multiple of the GEMM K block of the tier.
  int64_t head_chunk_rows = 0;
  // The whole-layout buffers the model holds; without them the caller binds
  // each unit's buffers through StepHooks (ZeRO-2/3; untied embeddings only).
  ParamBuffers buffers = {};
  // Tensor parallelism (shard.h): this rank's slice of every layer and the
  // group that joins them. Default: one rank, the whole model.
  ShardInfo shard = {};
  // Pipeline parallelism: the layers this model runs (StageRange: the first
  // stage embeds, the last holds the head) and how many micro-batches a
  // schedule keeps in flight, each with activations of its own (the blocks'
  // scratch and the head's buffers are shared: one block runs at a time).
  // Default: the whole model, one micro-batch.
  StageRange stage = {};
  int activation_slots = 1;
  // The FP8 precisions' recipe details (formats, MX rule, decode format);
  // its kind follows `precision`.
  Fp8Recipe fp8 = {};
  // FP8 precisions: the first and the last this many layers keep their GEMMs
  // out of FP8, as the LM head does: in f32, or bf16 (fp8.high_precision_bf16).
  int fp8_high_precision_layers = 0;
  // false: a trunk whose final features only a head of the caller's reads
  // (StepHooks::head_input; PPO's separate critic). The LM head never runs:
  // ForwardBackward's gradient comes from that hook alone (loss 0), Forward
  // returns no loss, Logits is refused. Its weights stay (checkpoints hold
  // them), the final norm's and an untied LM head's grads stay zero, and its
  // logits buffers are not allocated. A whole model on one rank with its own
  // buffers only: the head unit's hooks are not called.
  bool lm_head = true;
};

// What a Llama allocates, in bytes.
struct LlamaMemory {
  int64_t param_elements = 0;    // one flat buffer's length (tensors + padding)
  int64_t params_bytes = 0;      // the whole buffers held: weights, grads (f32), bf16 shadow
  int64_t activation_bytes = 0;  // the activation arena
  int64_t total() const { return params_bytes + activation_bytes; }
};

class Llama {
 public:
  // Allocates parameters and the activation arena (pages untouched until used).
  // `ctx` builds the RoPE table; its per-thread scratch must hold the attention
  // kernels' blocks (CHECKed).
  Llama(const ModelConfig& config, const LlamaOptions& options, const kernels::KernelCtx& ctx);

  // The bytes the constructor would allocate, computed without allocating,
  // so a caller can refuse a model the machine cannot hold.
  static LlamaMemory EstimateMemory(const ModelConfig& config, LlamaOptions options);

  const ModelConfig& config() const { return config_; }
  const LlamaOptions& options() const { return options_; }
  // A layer's sizes on this rank (its heads and FFN columns).
  const BlockShape& block_shape() const { return shape_; }
  // fp8-delayed: the tensors' amax histories and scales (the trainer runs
  // its BeginStep/EndStep around each step and checkpoints it); else null.
  Fp8DelayedScaling* fp8_delayed() const { return fp8_delayed_.get(); }
  LlamaParams& params() { return params_; }
  const LlamaParams& params() const { return params_; }

  // LlamaParams::Init (documented there), shadow included.
  void InitWeights(const kernels::KernelCtx& ctx, uint64_t seed);
  void ZeroGrads(const kernels::KernelCtx& ctx) { params_.ZeroGrads(ctx); }
  // Rewrites the bf16 shadow from the master weights (after a load or an
  // optimizer step that did not write it; kernels::AdamWUpdate can write it in
  // the same pass through params().bf16()).
  void RefreshBf16Weights(const kernels::KernelCtx& ctx) { params_.RefreshBf16(ctx); }

  // Forward and backward of one micro-batch on a whole model (StageForward
  // and StageBackward on slot 0). grads += d(loss_scale * loss_sum)/dw.
  // For the mean over all tokens of an accumulated step pass loss_scale =
  // 1 / (counted targets of all its micro-batches); loss_scale <= 0 means
  // 1 / (this batch's counted targets). Returns this batch's loss sum and count.
  // `hooks` (StepHooks) are called as the step walks the units; data
  // parallelism starts reducing a bucket once grads_ready says it is final.
  LossStats ForwardBackward(const kernels::KernelCtx& ctx, const Batch& batch, float loss_scale,
                            const StepHooks& hooks = {});
  // Evaluation: the loss only; reuses one layer's buffers, keeps nothing.
  // A whole model only (a pipeline's evaluation needs its schedule).
  LossStats Forward(const kernels::KernelCtx& ctx, const Batch& batch, const StepHooks& hooks = {});

  // A pipeline stage's half-steps, for a schedule that owns the micro-batch
  // order (any order with at most activation_slots forwards awaiting their
  // backward). The forward of micro-batch `slot`: the first stage embeds
  // batch.tokens, the others read stage_input(slot), which the caller filled
  // (the previous stage's stage_output). The last stage runs the head's loss
  // and its backward together, as ForwardBackward does, and returns the loss;
  // the others leave their output in stage_output(slot) and return nothing.
  // Every stage reads the batch's token layout; the last its targets.
  LossStats StageForward(const kernels::KernelCtx& ctx, int slot, const Batch& batch,
                         float loss_scale, const StepHooks& hooks = {});
  // The backward of micro-batch `slot` after its StageForward: the last stage
  // starts from the grad its forward left, the others from
  // stage_output_grad(slot), which the caller filled (the next stage's
  // stage_input_grad). The first stage ends in the embedding's grad; the
  // others leave the grad of their input in stage_input_grad(slot).
  void StageBackward(const kernels::KernelCtx& ctx, int slot, const Batch& batch,
                     const StepHooks& hooks = {});
  // A slot's [N, C] buffers for the schedule's sends and receives (N = the
  // batch's tokens). The output grad and the input grad are one buffer: the
  // backward turns the one into the other in place.
  float* stage_input(int slot);
  const float* stage_output(int slot);
  float* stage_output_grad(int slot);
  const float* stage_input_grad(int slot) { return stage_output_grad(slot); }
  const StageRange& stage() const { return options_.stage; }
  bool first_stage() const { return options_.stage.has_embedding(); }
  bool last_stage() const { return options_.stage.has_head(config_); }

  // Units, in layout order: the embedding (first stage), each layer of the
  // stage, the head (final norm and LM head; last stage). A whole model: 0 the
  // embedding, 1 + l layer l, n_layers + 1 the head. Each is one contiguous
  // range of the flat layout, [unit_begin(u), unit_begin(u + 1)).
  int num_units() const { return static_cast<int>(unit_begins_.size()) - 1; }
  int64_t unit_begin(int unit) const;
  // The units' first offsets in the layout of `config`, with the layout's
  // size last ([num_units + 1]), without building a model.
  static std::vector<int64_t> UnitBegins(const ModelConfig& config, const ShardInfo& shard = {},
                                         const StageRange& stage = {});
  // Points the unit's tensors at buffers laid out as its range of the layout
  // (its element i at base[i - unit_begin(unit)]): f32 weights and the bf16
  // copy (null in f32), or grads. For a model without whole buffers.
  void BindUnitWeights(int unit, const float* weights, const BF16* bf16);
  void BindUnitGrads(int unit, float* grads);
  // logits [N, V] of the forward (targets are ignored); `hooks` as Forward's
  // (head_input sees the LM head's input).
  void Logits(const kernels::KernelCtx& ctx, const Batch& batch, float* logits,
              const StepHooks& hooks = {});

  // Bytes of the activation arena (its high-water mark after the first step).
  size_t activation_capacity() const { return arena_.capacity(); }
  size_t activation_high_water() const { return arena_.high_water(); }

  // What a forward reads (the decoder too): shape, precision, RoPE table and
  // weight views, kept current as units are bound.
  const ForwardWeights& forward_weights() const { return fw_; }

 private:
  // Pointers into the arena for activations of N = max B*T rows. NL: the
  // stage's layers (index i is layer first_layer + i).
  template <typename A>
  struct Slot {                           // one micro-batch in flight
    std::vector<float*> resid;            // [2 NL + 1] x [N, C]: block inputs, the stage's output
    std::vector<AttentionSaved<A>> attn;  // [NL] (storage shared where recomputed)
    std::vector<MlpSaved<A>> mlp;         // [NL]
    float* d_resid = nullptr;             // [N, C] the residual stream's grad
  };
  template <typename A>
  struct Store {
    std::vector<Slot<A>> slots;         // [activation_slots]
    HeadSaved<A> head;                  // the head's forward and backward run in one go
    std::optional<Bf16Head> bf16_head;  // in its place: an FP8 model's head in bf16
    BlockScratch<A> scratch;            // scratch.linear: fp8
    BlockScratch<A> scratch_kept;       // the same buffers for layers kept out of FP8
    std::shared_ptr<Bf16Linear> bf16;   // their GEMMs in bf16 (else linear null: A's Gemm)
    std::shared_ptr<Fp8Linear> fp8;     // the FP8 precisions' linear layers and their buffers
    // fp8-delayed: each GEMM site's Fp8Linear (on fp8's buffers), and each
    // layer's scratch pointing at its sites ([stage layers]).
    std::vector<Fp8Linear> site_fp8;
    std::vector<BlockScratch<A>> layer_scratch;
  };
  // Lays out every activation of options.max_batch x options.max_seq_len
  // tokens through `alloc(bytes)`: a counter sizes the arena, the arena fills it.
  template <typename Alloc, typename A>
  static void Carve(const ModelConfig& config, const LlamaOptions& options, Alloc&& alloc,
                    Store<A>& s);
  template <typename A>
  Store<A>& store();
  // The scratch layer l runs with: FP8 GEMMs, or for a layer kept out of FP8
  // (fp8_high_precision_layers) f32 or bf16 ones.
  template <typename A>
  const BlockScratch<A>& LayerScratch(const Store<A>& s, int layer) const;
  enum class SlotPart : uint8_t { kInput, kOutput, kGrad };
  float* SlotBuffer(int slot, SlotPart which);
  template <typename A>
  LossStats RunForward(const kernels::KernelCtx& ctx, int slot, const Batch& batch,
                       float loss_scale, const StepHooks& hooks);
  template <typename A>
  void RunBackward(const kernels::KernelCtx& ctx, int slot, const Batch& batch,
                   const StepHooks& hooks);
  template <typename A>
  LossStats Evaluate(const kernels::KernelCtx& ctx, const Batch& batch, float* logits_out,
                     const StepHooks& hooks);
  TokenLayout Layout(const Batch& batch);

  ModelConfig config_;
  LlamaOptions options_;
  BlockShape shape_;
  int first_layer_ = 0, end_layer_ = 0;  // the stage's layers
  int layer_unit_ = 0;                   // the unit of layer first_layer_
  LlamaParams params_;
  int64_t max_tokens_ = 0;
  // UnitBegins: also where the grads become final during backward (the
  // first tensor of each layer, and of the head).
  std::vector<int64_t> unit_begins_;
  ForwardWeights fw_;   // the weight views (master and bf16), RoPE table, precision
  ModelView<float> g_;  // grads
  AlignedBuffer rope_storage_;
  std::vector<int32_t> cu_seqlens_;  // fixed-window layouts, sized up front
  std::vector<int32_t> positions_;
  Arena arena_;
  Store<float> store_f32_;
  Store<BF16> store_bf16_;
  std::unique_ptr<Fp8DelayedScaling> fp8_delayed_;  // fp8-delayed's amax histories and scales
};

}  // namespace anvil::model
