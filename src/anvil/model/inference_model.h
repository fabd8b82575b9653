// A model for decoding only: the weights a forward reads (f32 masters, the
// bf16 copy in bf16, an FP8 recipe's settings and fp8-delayed's scales),
// without the training Llama's gradients and activation store. The decoder,
// the rollout engine and `anvil generate` run on its forward_weights(); a
// trainer's Llama offers the same view of its own buffers.
#pragma once

#include <memory>

#include "anvil/core/aligned_buffer.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/config.h"
#include "anvil/model/forward_weights.h"
#include "anvil/model/weights.h"

namespace anvil::model {

class InferenceModel {
 public:
  // Weights allocated and zeroed (padding included): load or copy into
  // params().weights(), then RefreshBf16Weights in bf16.
  InferenceModel(const ModelConfig& config, const ForwardOptions& options,
                 const kernels::KernelCtx& ctx);
  InferenceModel(const InferenceModel&) = delete;
  InferenceModel& operator=(const InferenceModel&) = delete;

  const ModelConfig& config() const { return fw_.config; }
  Precision precision() const { return fw_.precision; }
  LlamaParams& params() { return params_; }
  const LlamaParams& params() const { return params_; }
  // Rewrites the bf16 copy from the master weights (bf16; else nothing).
  void RefreshBf16Weights(const kernels::KernelCtx& ctx) { params_.RefreshBf16(ctx); }
  // fp8-delayed: the scales a checkpoint restores; else null.
  Fp8DelayedScaling* fp8_delayed() const { return fp8_delayed_.get(); }
  const ForwardWeights& forward_weights() const { return fw_; }

 private:
  LlamaParams params_;
  AlignedBuffer rope_storage_;
  std::unique_ptr<Fp8DelayedScaling> fp8_delayed_;
  ForwardWeights fw_;
};

}  // namespace anvil::model
