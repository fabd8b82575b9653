// Integer inference for a model's linear layers (`anvil generate --quant`,
// `anvil eval --quant`): every layer's q|k|v, o, gate|up and down weights
// quantized once (W8A8: int8 per output channel; W4A8: int4 per group of 128
// along K), activations quantized per token row at each call, multiplied by
// kernels::GemmInt (gemm_int.h). The embedding, norms, attention, the KV
// cache and the LM head stay f32, the head packed once (as PackedLinear packs
// it: the same bits as the model's own GEMM, which packed it again for every
// token). Forward only; one call at a time (the activations' codes go to one
// buffer).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/status.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/gemm_int.h"
#include "anvil/model/low_precision_linear.h"

namespace anvil::model {

struct ForwardWeights;

enum class WeightQuant : uint8_t { kNone, kW8A8, kW4A8 };
Result<WeightQuant> ParseWeightQuant(const std::string& name);  // "none" | "w8a8" | "w4a8"
const char* WeightQuantName(WeightQuant quant);

class IntLinear : public LowPrecisionLinear {
 public:
  // Quantizes `model`'s layer weights (an f32 model: the weights read are its
  // f32 masters, as they are when the call is made) for calls of up to
  // `max_rows` token rows.
  IntLinear(const ForwardWeights& model, WeightQuant quant, int64_t max_rows,
            const kernels::KernelCtx& ctx);

  // Quantizes the model's current weights again, and packs its head again
  // (they changed: an RL rollout after a training step).
  void Requantize(const ForwardWeights& model, const kernels::KernelCtx& ctx);

  // Bytes of the quantized weights (codes and scales; not the packed head).
  int64_t weight_bytes() const;

  // y (+)= x · w for one of the model's layer weights `w` (looked up by address).
  void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const float* x,
               const float* w, float* y, bool accumulate) const override;
  // Inference only: these CHECK-fail.
  void BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                    const float* dy, const float* w, float* dx) const override;
  void BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                      const float* x, const float* dy, float* dw) const override;
  bool HeadLogits(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                  const float* xn, const float* lm_head, float* logits) const override;

 private:
  kernels::IntBits bits_;
  kernels::PackedB head_;
  std::unordered_map<const float*, kernels::IntWeights> weights_;
  int64_t max_rows_;
  mutable AlignedBuffer rows_;  // the activations' codes of one call
};

}  // namespace anvil::model
