// A decode-only model (inference_model.h).
#include "anvil/model/inference_model.h"

#include <cstring>

namespace anvil::model {

InferenceModel::InferenceModel(const ModelConfig& config, const ForwardOptions& options,
                               const kernels::KernelCtx& ctx)
    : params_(config, HoldsBf16Weights(options.precision, options.fp8),
              ParamBuffers{.weights = true, .grads = false}) {
  float* w = params_.weights().data();
  std::memset(w, 0, static_cast<size_t>(params_.size()) * sizeof(float));
  params_.RefreshBf16(ctx);
  fw_ = ViewOf(params_, options, ctx, rope_storage_);
  if (options.precision == Precision::kFp8Delayed) {
    const Fp8Recipe& r = options.fp8;
    fp8_delayed_ = std::make_unique<Fp8DelayedScaling>(
        config.n_layers * kLinearSites, r.amax_history, r.amax_most_recent, r.forward, r.grad);
    fw_.fp8_delayed = fp8_delayed_.get();
  }
}

}  // namespace anvil::model
