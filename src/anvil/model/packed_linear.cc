// Linear GEMMs over weights packed once (packed_linear.h).
#include "anvil/model/packed_linear.h"

#include "anvil/core/check.h"

namespace anvil::model {

PackedLinear::PackedLinear(const ForwardWeights& model) : model_(model) {
  CHECK(model.precision == Precision::kF32)
      << "packed decoding GEMMs are f32, not " << PrecisionName(model.precision);
  CHECK(model.whole()) << "packed decoding GEMMs take a whole model";
}

void PackedLinear::Pack(const kernels::KernelCtx& ctx) {
  if (!layers_.empty()) {
    for (auto& [w, packed] : layers_) packed.Repack(ctx);
    head_.Repack(ctx);
    return;
  }
  model_.ForEachLinear([&](const float* w, int64_t in, int64_t out) {
    layers_.emplace(w, kernels::PackedB(ctx, {.n = out, .k = in}, w));
  });
  head_ = kernels::PackedB(
      ctx, {.n = model_.config.vocab_size, .k = model_.config.dim, .trans_b = kernels::Trans::kT},
      model_.Head<float>().lm_head);
}

int64_t PackedLinear::bytes() const {
  int64_t total = head_.bytes();
  for (const auto& [w, packed] : layers_) total += packed.bytes();
  return total;
}

void PackedLinear::Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                           const float* x, const float* w, float* y, bool accumulate) const {
  const auto it = layers_.find(w);
  CHECK(it != layers_.end()) << "PackedLinear: a weight it did not pack";
  kernels::Gemm(ctx, {.m = n, .n = out, .k = in, .accumulate = accumulate}, x, it->second, y);
}

bool PackedLinear::HeadLogits(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                              const float* xn, const float* lm_head, float* logits) const {
  CHECK(lm_head == head_.original()) << "PackedLinear: another model's LM head";
  kernels::Gemm(ctx, {.m = n, .n = vocab, .k = dim, .trans_b = kernels::Trans::kT}, xn, head_,
                logits);
  return true;
}

void PackedLinear::BackwardData(const kernels::KernelCtx&, int64_t, int64_t, int64_t, const float*,
                                const float*, float*) const {
  CHECK(false) << "PackedLinear is inference only (no backward)";
}

void PackedLinear::BackwardWeight(const kernels::KernelCtx&, int64_t, int64_t, int64_t,
                                  const float*, const float*, float*) const {
  CHECK(false) << "PackedLinear is inference only (no backward)";
}

}  // namespace anvil::model
