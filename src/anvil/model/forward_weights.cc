// Weight views of a forward pass (forward_weights.h).
#include "anvil/model/forward_weights.h"

namespace anvil::model {

bool ForwardWeights::Fp8Layer(int layer) const {
  const int keep = fp8_high_precision_layers;
  return IsFp8(precision) && layer >= keep && layer < config.n_layers - keep;
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

kernels::RopeTable BuildRope(const kernels::KernelCtx& ctx, const ModelConfig& config,
                             AlignedBuffer& storage) {
  storage = AlignedBuffer(kernels::RopeTableFloats(config.max_seq_len, config.head_dim()) *
                          sizeof(float));
  return kernels::RopeBuildTable(ctx, config.max_seq_len, config.head_dim(), config.rope_theta,
                                 reinterpret_cast<float*>(storage.data()));
}

}  // namespace anvil::model
