// Weight views of a forward pass (forward_weights.h).
#include "anvil/model/forward_weights.h"

#include "anvil/model/ops.h"

namespace anvil::model {

bool ForwardWeights::Fp8Layer(int layer) const {
  const int keep = fp8_high_precision_layers;
  return IsFp8(precision) && layer >= keep && layer < config.n_layers - keep;
}

bool ForwardWeights::ScalesFixed() const {
  if (precision == Precision::kFp8Tensor) return false;
  if (precision != Precision::kFp8Delayed) return true;
  for (int layer = stage.first_layer; layer < stage.end_layer(config); ++layer) {
    if (!Fp8Layer(layer)) continue;
    for (int site = layer * kLinearSites; site < (layer + 1) * kLinearSites; ++site) {
      for (const auto op : {Fp8DelayedScaling::kInput, Fp8DelayedScaling::kWeight}) {
        if (!fp8_delayed->HasHistory(Fp8DelayedScaling::Index(site, op))) return false;
      }
    }
  }
  return true;
}

template <>
AttentionWeights<float> ForwardWeights::Attention<float>(int l) const {
  return {w.layers[l].attn_norm, w.layers[l].wqkv, w.layers[l].wo};
}
template <>
AttentionWeights<BF16> ForwardWeights::Attention<BF16>(int l) const {
  return {w.layers[l].attn_norm, wb.layers[l].wqkv, wb.layers[l].wo};
}
template <>
MlpWeights<float> ForwardWeights::Mlp<float>(int l) const {
  return {w.layers[l].mlp_norm, w.layers[l].w_gate_up, w.layers[l].w_down};
}
template <>
MlpWeights<BF16> ForwardWeights::Mlp<BF16>(int l) const {
  return {w.layers[l].mlp_norm, wb.layers[l].w_gate_up, wb.layers[l].w_down};
}
template <>
HeadWeights<float> ForwardWeights::Head<float>() const {
  return {w.final_norm, w.lm_head};
}
template <>
HeadWeights<BF16> ForwardWeights::Head<BF16>() const {
  return {w.final_norm, wb.lm_head};
}

namespace {

template <typename A, typename Fn>
void EachLinear(const ForwardWeights& fw, const Fn& fn) {
  const BlockShape& s = fw.shape;
  for (int l = fw.stage.first_layer; l < fw.stage.end_layer(fw.config); ++l) {
    const AttentionWeights<A> aw = fw.Attention<A>(l);
    const MlpWeights<A> mw = fw.Mlp<A>(l);
    fn(aw.wqkv, s.dim, s.qkv());
    fn(aw.wo, s.q(), s.dim);
    fn(mw.w_gate_up, s.dim, 2 * s.ffn);
    fn(mw.w_down, s.ffn, s.dim);
  }
}

}  // namespace

void ForwardWeights::ForEachLinear(
    const std::function<void(const float* w, int64_t in, int64_t out)>& fn) const {
  EachLinear<float>(*this, fn);
}

void ForwardWeights::ForEachLinearBf16(
    const std::function<void(const BF16* w, int64_t in, int64_t out)>& fn) const {
  EachLinear<BF16>(*this, fn);
}

ForwardWeights ViewOf(const LlamaParams& params, const ForwardOptions& options,
                      const kernels::KernelCtx& ctx, AlignedBuffer& rope_storage) {
  const ModelConfig& config = params.config();
  ForwardWeights fw;
  fw.config = config;
  fw.precision = options.precision;
  fw.fp8 = options.fp8;
  fw.fp8_high_precision_layers = options.fp8_high_precision_layers;
  fw.shape = BlockShape::Of(config, params.shard());
  fw.stage = params.stage();
  rope_storage = AlignedBuffer(kernels::RopeTableFloats(config.max_seq_len, config.head_dim()) *
                               sizeof(float));
  fw.rope = kernels::RopeBuildTable(ctx, config.max_seq_len, config.head_dim(), config.rope_theta,
                                    reinterpret_cast<float*>(rope_storage.data()));
  fw.w.layers.resize(config.n_layers);
  fw.wb.layers.resize(config.n_layers);
  if (params.has_weights()) fw.w = params.View(params.weights().data());
  if (params.has_bf16()) fw.wb = params.View(params.bf16().data());
  return fw;
}

}  // namespace anvil::model
