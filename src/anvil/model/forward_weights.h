// What a forward pass over a model reads, as views: its shape, precision
// (with the FP8 recipe's settings and fp8-delayed's scales), the RoPE table
// and the weights (f32 masters and, in bf16, the bf16 copy). The training
// Llama keeps one over its buffers; an InferenceModel (inference_model.h)
// over its own, without gradients or an activation store. The decoder and
// the integer layers read a model through it, so decoding needs no training
// model. Views only: the owner's buffers must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>

#include "anvil/core/aligned_buffer.h"
#include "anvil/kernels/ctx.h"
#include "anvil/kernels/rope.h"
#include "anvil/model/attention_block.h"
#include "anvil/model/config.h"
#include "anvil/model/fp8_delayed_scaling.h"
#include "anvil/model/fp8_linear.h"
#include "anvil/model/head_block.h"
#include "anvil/model/mlp_block.h"
#include "anvil/model/shard.h"
#include "anvil/model/weights.h"

namespace anvil::model {

// What a forward's arithmetic follows besides the weights.
struct ForwardOptions {
  Precision precision = Precision::kF32;
  Fp8Recipe fp8 = {};                 // the FP8 precisions'
  int fp8_high_precision_layers = 0;  // first and last layers kept out of FP8
};

struct ForwardWeights {
  ModelConfig config;
  Precision precision = Precision::kF32;
  Fp8Recipe fp8 = {};                 // the FP8 precisions'
  int fp8_high_precision_layers = 0;  // first and last layers kept out of FP8
  BlockShape shape;                   // this rank's heads and FFN columns
  StageRange stage = {};              // the layers held (a pipeline stage's, or all)
  kernels::RopeTable rope = {};
  ModelView<const float> w;                  // master weights
  ModelView<const BF16> wb;                  // the bf16 copy (bf16 precision)
  Fp8DelayedScaling* fp8_delayed = nullptr;  // fp8-delayed: the amax histories and scales

  bool whole() const { return stage.has_embedding() && stage.has_head(config); }
  // Whether an FP8 precision runs its GEMMs kept out of FP8 (the LM head,
  // the kept layers) in bf16 (Fp8Recipe::high_precision_bf16).
  bool HighPrecisionBf16() const { return KeptInBf16(precision, fp8); }
  // Whether layer `layer` runs its GEMMs in FP8.
  bool Fp8Layer(int layer) const;
  // Whether a forward's quantization scales are fixed rather than taken from
  // the batch, so a row's result depends on it alone (decoding and rollouts
  // need it): all but fp8-tensor, and fp8-delayed once the input and weight
  // of every GEMM site of its FP8 layers have an amax history.
  bool ScalesFixed() const;
  // The blocks' weights in the step's precision (A = float or BF16).
  template <typename A>
  AttentionWeights<A> Attention(int layer) const;
  template <typename A>
  MlpWeights<A> Mlp(int layer) const;
  template <typename A>
  HeadWeights<A> Head() const;
  // fn(head weights, saved, scratch) with the head in the form it runs: bf16
  // where `bf16_head` holds an FP8 model's bf16 head (HighPrecisionBf16),
  // else A's with `saved` and `scratch`.
  template <typename A, typename Fn>
  auto WithHead(const std::optional<Bf16Head>& bf16_head, const HeadSaved<A>& saved,
                const BlockScratch<A>& scratch, Fn&& fn) const {
    if constexpr (std::is_same_v<A, float>) {
      if (bf16_head) return fn(Head<BF16>(), bf16_head->saved, bf16_head->scratch);
    }
    return fn(Head<A>(), saved, scratch);
  }
  // Each layer's linear weights (f32 masters, [in, out]) in layer order: QKV,
  // output, gate/up, down (what a LowPrecisionLinear runs).
  void ForEachLinear(const std::function<void(const float* w, int64_t in, int64_t out)>& fn) const;
  // The same over the bf16 copy (bf16 precision).
  void ForEachLinearBf16(
      const std::function<void(const BF16* w, int64_t in, int64_t out)>& fn) const;
};

// The views of the buffers `params` holds (those it does not stay null, for
// binding unit by unit), of its config, tensor-parallel slice and stage, with
// `options`, and the RoPE table built into `rope_storage`. fp8_delayed is the
// caller's to set.
ForwardWeights ViewOf(const LlamaParams& params, const ForwardOptions& options,
                      const kernels::KernelCtx& ctx, AlignedBuffer& rope_storage);

}  // namespace anvil::model
