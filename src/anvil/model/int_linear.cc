// IntLinear: the layer weights quantized once, GemmInt per call (int_linear.h).
#include "anvil/model/int_linear.h"

#include <fmt/core.h>

#include <algorithm>

#include "anvil/core/check.h"
#include "anvil/model/forward_weights.h"

namespace anvil::model {

Result<WeightQuant> ParseWeightQuant(const std::string& name) {
  if (name == "none") return WeightQuant::kNone;
  if (name == "w8a8") return WeightQuant::kW8A8;
  if (name == "w4a8") return WeightQuant::kW4A8;
  return InvalidArgument(fmt::format("--quant '{}': expected none, w8a8 or w4a8", name));
}

const char* WeightQuantName(WeightQuant quant) {
  switch (quant) {
    case WeightQuant::kNone: return "none";
    case WeightQuant::kW8A8: return "w8a8";
    case WeightQuant::kW4A8: return "w4a8";
  }
  return "?";
}

IntLinear::IntLinear(const ForwardWeights& model, WeightQuant quant, int64_t max_rows,
                     const kernels::KernelCtx& ctx)
    : max_rows_(max_rows) {
  CHECK(quant != WeightQuant::kNone) << "IntLinear needs w8a8 or w4a8";
  CHECK(model.precision == Precision::kF32)
      << "integer inference quantizes an f32 model's weights, not "
      << PrecisionName(model.precision);
  CHECK(model.whole()) << "IntLinear runs a whole model (it packs the LM head)";
  bits_ = quant == WeightQuant::kW8A8 ? kernels::IntBits::kInt8 : kernels::IntBits::kInt4;
  Requantize(model, ctx);
  const BlockShape& s = model.shape;
  const int64_t widest = std::max({s.dim, s.q(), s.ffn});
  rows_ = AlignedBuffer(kernels::IntRowsBytes(max_rows, widest));
}

void IntLinear::Requantize(const ForwardWeights& model, const kernels::KernelCtx& ctx) {
  weights_.clear();
  model.ForEachLinear([&](const float* w, int64_t in, int64_t out) {
    weights_.emplace(w, kernels::QuantizeWeightsInt(ctx, in, out, w, 0, bits_));
  });
  const float* lm_head = model.Head<float>().lm_head;
  if (head_.original() == lm_head) {
    head_.Repack(ctx);
    return;
  }
  const kernels::GemmArgs head{
      .n = model.config.vocab_size, .k = model.config.dim, .trans_b = kernels::Trans::kT};
  head_ = kernels::PackedB(ctx, head, lm_head);
}

int64_t IntLinear::weight_bytes() const {
  int64_t bytes = 0;
  for (const auto& [w, q] : weights_) bytes += q.bytes();
  return bytes;
}

void IntLinear::Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                        const float* x, const float* w, float* y, bool accumulate) const {
  const auto it = weights_.find(w);
  CHECK(it != weights_.end()) << "IntLinear: a weight that was not quantized";
  const kernels::IntWeights& q = it->second;
  CHECK(q.k() == in && q.n() == out && n <= max_rows_)
      << "IntLinear: [" << n << ", " << in << "] x [" << in << ", " << out << "] against weights ["
      << q.k() << ", " << q.n() << "] for up to " << max_rows_ << " rows";
  const kernels::IntRows a = kernels::QuantizeRowsInt8(ctx, n, in, x, 0, rows_.data(), &q);
  kernels::GemmInt(ctx, a, q, y, 0, accumulate);
}

bool IntLinear::HeadLogits(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                           const float* xn, const float* lm_head, float* logits) const {
  CHECK(lm_head == head_.original()) << "IntLinear: another model's LM head";
  kernels::Gemm(ctx, {.m = n, .n = vocab, .k = dim, .trans_b = kernels::Trans::kT}, xn, head_,
                logits);
  return true;
}

void IntLinear::BackwardData(const kernels::KernelCtx&, int64_t, int64_t, int64_t, const float*,
                             const float*, float*) const {
  CHECK(false) << "IntLinear is inference only (no backward)";
}

void IntLinear::BackwardWeight(const kernels::KernelCtx&, int64_t, int64_t, int64_t, const float*,
                               const float*, float*) const {
  CHECK(false) << "IntLinear is inference only (no backward)";
}

}  // namespace anvil::model
