// A decode-only model (inference_model.h).
#include "anvil/model/inference_model.h"

#include <cstring>

namespace anvil::model {

InferenceModel::InferenceModel(const ModelConfig& config, const InferenceOptions& options,
                               const kernels::KernelCtx& ctx)
    : params_(config, options.precision == Precision::kBF16,
              ParamBuffers{.weights = true, .grads = false}) {
  float* w = params_.weights().data();
  std::memset(w, 0, static_cast<size_t>(params_.size()) * sizeof(float));
  params_.RefreshBf16(ctx);
  fw_.config = config;
  fw_.precision = options.precision;
  fw_.fp8 = options.fp8;
  fw_.fp8_high_precision_layers = options.fp8_high_precision_layers;
  fw_.shape = BlockShape::Of(config, {});
  fw_.rope = BuildRope(ctx, config, rope_storage_);
  fw_.w = params_.View(static_cast<const float*>(w));
  fw_.wb.layers.resize(config.n_layers);
  if (params_.has_bf16()) fw_.wb = params_.View(static_cast<const BF16*>(params_.bf16().data()));
  if (options.precision == Precision::kFp8Delayed) {
    const Fp8Recipe& r = options.fp8;
    fp8_delayed_ = std::make_unique<Fp8DelayedScaling>(
        config.n_layers * kLinearSites, r.amax_history, r.amax_most_recent, r.forward, r.grad);
    fw_.fp8_delayed = fp8_delayed_.get();
  }
}

}  // namespace anvil::model
