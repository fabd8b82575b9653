// Llama parameters in flat buffers: one f32 master buffer, one f32 gradient
// buffer of the same layout and (bf16 precision) a bf16 shadow of the master,
// again in the same layout, so one element offset addresses all three. Every
// tensor starts on a 64-byte line (padding is zero and stays zero). Linear
// weights are stored [in, out] (forward is an NN GEMM); the token embedding
// and the LM head are [V, C] so a tied head is the embedding buffer itself.
//
// Under tensor parallelism (shard.h) a rank's buffers hold its slices only:
// the layout is the same list of tensors, each with this rank's shape, and
// ParamInfo says how the slice sits in the whole tensor. A fused tensor's
// slice is contiguous per rank: rank r's wqkv columns are its q heads, then
// its k heads, then its v heads (gate_up: its gate columns, then its up
// columns), the order the kernels read, so one GEMM serves every degree. At
// degree 1 the layout is the whole model's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/config.h"
#include "anvil/model/shard.h"

namespace anvil::model {

// One layer's tensors inside a flat buffer of element type T.
template <typename T>
struct LayerView {
  T* attn_norm = nullptr;  // [C]
  T* wqkv = nullptr;       // [C, QKV]  columns: q [NH*HD], k [NKV*HD], v [NKV*HD]
  T* wo = nullptr;         // [NH*HD, C]
  T* mlp_norm = nullptr;   // [C]
  T* w_gate_up = nullptr;  // [C, 2F]   columns: gate [F], then up [F]
  T* w_down = nullptr;     // [F, C]
};

// All tensors inside a flat buffer of element type T (f32 weights or grads, bf16 shadow).
template <typename T>
struct ModelView {
  T* embed = nullptr;                // [V, C]
  std::vector<LayerView<T>> layers;  // [L]
  T* final_norm = nullptr;           // [C]
  T* lm_head = nullptr;              // [V, C]; == embed when tied
};

enum class ParamKind : uint8_t {
  kEmbed,
  kAttnNorm,
  kWqkv,
  kWo,
  kMlpNorm,
  kWGateUp,
  kWDown,
  kFinalNorm,
  kLmHead
};

// How a tensor is cut across the tensor-parallel ranks.
enum class TpSplit : uint8_t {
  kReplicated,  // whole on every rank: norms, embedding, LM head
  kColumns,     // [in, out] column-parallel: each rank takes an equal share of every
                // column part (q|k|v, gate|up), its shares side by side
  kRows,        // [in, out] row-parallel: each rank takes an equal share of the rows (wo, w_down)
};

// A tensor of the layout: canonical name ("layers.3.wqkv"), shape as stored
// on this rank, element offset in the flat buffers.
struct ParamInfo {
  std::string name;
  ParamKind kind;
  int layer = -1;  // -1 for embed, final_norm, lm_head
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 0;
  TpSplit split = TpSplit::kReplicated;
  std::vector<int64_t> column_parts;  // kColumns: the whole tensor's column groups
  int index = 0;  // position in the whole model's list of tensors (its init stream)
};

// The layers a pipeline stage runs, [first_layer, end): the first stage also
// holds the embedding, the last the final norm and the LM head. The default is
// the whole model.
struct StageRange {
  int first_layer = 0;
  int num_layers = -1;  // -1: through the last layer

  int end_layer(const ModelConfig& c) const {
    return num_layers < 0 ? static_cast<int>(c.n_layers) : first_layer + num_layers;
  }
  bool has_embedding() const { return first_layer == 0; }
  bool has_head(const ModelConfig& c) const { return end_layer(c) == c.n_layers; }
  // "stage layers [4, 9) outside model.n_layers = 8"; also refuses a tied
  // embedding whose two uses would sit on different stages.
  Status Check(const ModelConfig& c) const;
};

// A run of a rank's slice that is contiguous in the whole tensor too:
// elements [local, local + count) of the slice are [global, global + count)
// of the whole tensor (row-major).
struct ShardSegment {
  int64_t local = 0;
  int64_t global = 0;
  int64_t count = 0;
};
// The segments of p's slice on `shard`, in local order (one for a replicated
// tensor or at degree 1).
std::vector<ShardSegment> ShardSegments(const ParamInfo& p, const ShardInfo& shard);

// Which whole-layout buffers a LlamaParams holds. Sharded data parallelism
// leaves out the grads (ZeRO-2: each unit's grads go to a buffer of its own,
// Llama::BindUnitGrads) or the weights and their bf16 copy too (ZeRO-3).
struct ParamBuffers {
  bool weights = true;  // f32 master weights (and the bf16 copy, with bf16)
  bool grads = true;
};
// Tied embeddings need both whole buffers: the LM head is the embedding, one
// tensor in two units, where ZeRO-2/3 reduce and gather unit by unit. The
// reason, for callers to prefix with the setting that asked for less.
Status CheckParamBuffers(const ModelConfig& config, ParamBuffers buffers);

class LlamaParams {
 public:
  // Allocates (untouched) weights and grads; the bf16 shadow only if
  // `with_bf16`. `shard`: this rank's slices under tensor parallelism.
  LlamaParams(const ModelConfig& config, bool with_bf16, ParamBuffers buffers = {},
              const ShardInfo& shard = {}, const StageRange& stage = {});

  const ModelConfig& config() const { return config_; }
  const ShardInfo& shard() const { return shard_; }
  const StageRange& stage() const { return stage_; }
  const std::vector<ParamInfo>& params() const { return params_; }
  // Elements in each flat buffer (tensors plus alignment padding).
  int64_t size() const { return size_; }
  // The tensors of `config` in layout order (this rank's slices), and (*size)
  // the buffer length, without allocating: what the constructor lays out.
  static std::vector<ParamInfo> Layout(const ModelConfig& config, int64_t* size,
                                       const ShardInfo& shard = {}, const StageRange& stage = {});
  bool has_bf16() const { return bf16_.size() != 0; }
  bool has_weights() const { return weights_.size() != 0; }
  bool has_grads() const { return grads_.size() != 0; }

  // Empty where the buffer is not held (ParamBuffers).
  std::span<float> weights() { return {Base<float>(weights_), Held(weights_)}; }
  std::span<const float> weights() const { return {CBase<float>(weights_), Held(weights_)}; }
  std::span<float> grads() { return {Base<float>(grads_), Held(grads_)}; }
  std::span<const float> grads() const { return {CBase<float>(grads_), Held(grads_)}; }
  // Empty without a shadow.
  std::span<BF16> bf16() {
    return {Base<BF16>(bf16_), has_bf16() ? static_cast<size_t>(size_) : 0};
  }
  std::span<const BF16> bf16() const {
    return {CBase<BF16>(bf16_), has_bf16() ? static_cast<size_t>(size_) : 0};
  }

  // Named views of any buffer with this layout.
  template <typename T>
  ModelView<T> View(T* base) const;
  ModelView<float> WeightView() { return View(weights().data()); }
  ModelView<const float> WeightView() const { return View(weights().data()); }
  ModelView<float> GradView() { return View(grads().data()); }

  // fn(info, weight span, grad span) for every tensor in layout order (both
  // buffers held).
  template <typename Fn>
  void Visit(Fn&& fn) {
    for (const ParamInfo& p : params_) {
      fn(p, weights().subspan(p.offset, p.numel), grads().subspan(p.offset, p.numel));
    }
  }

  // Documented initialisation (deterministic for any thread count): tensor i
  // of the whole model (ParamInfo::index) draws RngStream(seed, kInit, /*step=*/i).Normal(j) for
  // its element j in the whole tensor's stored order (so a tensor-parallel slice holds the whole
  // model's values), times init_std, and times 1/sqrt(2 L) for the residual-output projections wo
  // and w_down; norm weights are 1; padding 0. Refreshes the bf16 shadow. Grads are zeroed.
  void Init(const kernels::KernelCtx& ctx, uint64_t seed);
  // The same values for the elements [begin, end) of the layout alone, into
  // out[0, end - begin) (a shard of the weights: ZeRO-3 keeps no whole copy).
  void InitRange(const kernels::KernelCtx& ctx, uint64_t seed, int64_t begin, int64_t end,
                 float* out) const;
  void ZeroGrads(const kernels::KernelCtx& ctx);
  // bf16 shadow = RNE(master) (no-op without a shadow).
  void RefreshBf16(const kernels::KernelCtx& ctx);

 private:
  size_t Held(const AlignedBuffer& b) const {
    return b.size() != 0 ? static_cast<size_t>(size_) : 0;
  }
  template <typename T>
  T* Base(AlignedBuffer& b) {
    return reinterpret_cast<T*>(b.data());
  }
  template <typename T>
  const T* CBase(const AlignedBuffer& b) const {
    return reinterpret_cast<const T*>(b.data());
  }

  ModelConfig config_;
  ShardInfo shard_;
  StageRange stage_;
  std::vector<ParamInfo> params_;
  int64_t size_ = 0;
  AlignedBuffer weights_, grads_, bf16_;
};

// Points v's field for tensor p at ptr.
template <typename T>
void SetViewPointer(ModelView<T>& v, const ParamInfo& p, T* ptr) {
  switch (p.kind) {
    case ParamKind::kEmbed:
      v.embed = ptr;
      break;
    case ParamKind::kAttnNorm:
      v.layers[p.layer].attn_norm = ptr;
      break;
    case ParamKind::kWqkv:
      v.layers[p.layer].wqkv = ptr;
      break;
    case ParamKind::kWo:
      v.layers[p.layer].wo = ptr;
      break;
    case ParamKind::kMlpNorm:
      v.layers[p.layer].mlp_norm = ptr;
      break;
    case ParamKind::kWGateUp:
      v.layers[p.layer].w_gate_up = ptr;
      break;
    case ParamKind::kWDown:
      v.layers[p.layer].w_down = ptr;
      break;
    case ParamKind::kFinalNorm:
      v.final_norm = ptr;
      break;
    case ParamKind::kLmHead:
      v.lm_head = ptr;
      break;
  }
}

// Tied parameters, one rule for every view: with model.tie_embeddings the LM
// head is no tensor of its own but the embedding itself, the same weights and
// the same grads, so the head's gradient adds into the embedding's and that
// unit's grads are final only after the embedding's backward (which comes
// after the head's). Both uses must sit on one pipeline stage
// (StageRange::Check); splitting them needs a copy on the last stage and an
// all-reduce of the two grads, which no schedule does yet.
template <typename T>
void ApplyTies(const ModelConfig& config, ModelView<T>& v) {
  if (config.tie_embeddings) v.lm_head = v.embed;
}

// Layers outside the stage stay null.
template <typename T>
ModelView<T> LlamaParams::View(T* base) const {
  ModelView<T> v;
  v.layers.resize(config_.n_layers);
  for (const ParamInfo& p : params_) SetViewPointer(v, p, base + p.offset);
  ApplyTies(config_, v);
  return v;
}

}  // namespace anvil::model
