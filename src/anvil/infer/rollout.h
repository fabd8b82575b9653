// The rollout engine's first form: many prompts, several samples each,
// generated with continuous batching over the KV-cache decoder — up to
// `max_batch` sequences in flight; a finished one (eos, max_new tokens, or a
// full context) leaves the batch at once and the next waiting sample takes
// its cache slot, prefilling its prompt while the others keep decoding
// together. Every token comes with its log-probability under the
// distribution it was sampled from (sampling.h), drawn from the random stream
// of (seed, request, sample) at its position, so a rollout is a pure
// function of the weights, the prompts and the settings: not of max_batch,
// the order sequences finish in, or the thread count.
//
// Exact parity: the decoder's logits are the training forward's bit for bit
// (contract 3), so RecomputeLogProbs, which scores finished samples with
// Llama::Logits as a trainer does, gives the engine's log-probabilities
// exactly (the tests assert max |difference| = 0).
//
// With options.page_rows the cache is paged and a prompt's G samples share
// its prefill (model::Decoder::Fork); the results are the same bits.
//
// The engine decodes through a model's ForwardWeights: a trainer's Llama in
// place (colocated RL), or a decode-only model::InferenceModel (no gradients
// or activation store).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "anvil/infer/sampling.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/decode.h"
#include "anvil/model/llama.h"
#include "anvil/model/low_precision_linear.h"
#include "anvil/model/packed_linear.h"

namespace anvil::infer {

struct RolloutOptions {
  int64_t max_batch = 8;  // sequences decoded together
  int64_t max_new = 64;   // most new tokens per sample
  int samples = 1;        // G: samples per prompt
  int32_t eos = -1;       // stops a sample (kept as its last token); -1: none
  SamplingConfig sampling = {};
  // > 0: a paged KV cache with pages of this many positions (a multiple of
  // 64): a prompt is prefilled once and its G samples share its pages.
  int64_t page_rows = 0;
  // Rollouts in another format than training on purpose (model/int_linear.h:
  // W8A8 or W4A8 layers; it outlives the engine and is kept current by its
  // owner): the layers' GEMMs go through it, so the log-probabilities are
  // the quantized policy's, not the trainer's (an RL step then corrects for
  // the mismatch: rl/grpo.h).
  const model::LowPrecisionLinear* linear = nullptr;
  // Stop strings (stop_strings.h): a sample also stops once its text, the
  // bytes `token_text` gives its tokens, holds one of them ("stop").
  std::vector<std::string> stop = {};
  std::function<std::string(int32_t token)> token_text = nullptr;
  // An f32, bf16 or FP8 model without `linear` decodes through its weights packed
  // once per Generate call (model::PackedLinear: the same bits, no packing or
  // FP8 quantizing in every decode step) at the cost of a packed copy of
  // them; false: the GEMMs pack per call.
  bool pack_weights = true;
};

struct RolloutSample {
  int64_t request = 0;  // the prompt's index
  int sample = 0;       // 0..G-1
  std::vector<int32_t> tokens;  // the completion (eos included when it stopped there)
  std::vector<double> logprobs;  // one per completion token
  std::string stop_reason;       // "eos", "stop", "max_new" or "max_seq_len"
};

struct RolloutStats {
  int64_t prompt_tokens = 0, new_tokens = 0, steps = 0;  // steps: batched decode passes
  double seconds = 0;
  // What the engine holds besides the model it reads: weights packed once
  // (RolloutOptions::pack_weights), the KV cache and the decode scratch.
  int64_t engine_bytes = 0;
};

class RolloutEngine {
 public:
  // A decoder for `options.max_batch` (>= 1) sequences of up to the model's
  // max_seq_len tokens over `model` (a whole f32 or bf16 model, or an FP8
  // recipe with per-row or fixed scales: fp8-block, mxfp8, fp8-delayed with
  // its histories; weights read at each call, so a trainer's updates are
  // seen): a training Llama's forward_weights() or an InferenceModel's,
  // which must outlive the engine. options.page_rows must be 0 or a multiple
  // of 64.
  RolloutEngine(const model::ForwardWeights& model, const RolloutOptions& options);
  const RolloutOptions& options() const { return options_; }
  int64_t bytes() const;  // RolloutStats::engine_bytes

  // G samples of every prompt, in (request, sample) order. Prompts must be
  // non-empty and fit the context. Prompt i is request first_request + i of
  // the random streams (an RL loop numbers its steps' prompts apart, so no
  // two steps draw the same numbers). `cancel` (may be empty) is polled
  // before each decode step: once true, the call ends with a Cancelled
  // status (a draw nobody will read: an RL run stopping). `sampling`: the
  // prompts' own settings (temperature, top-k, top-p, greedy, seed), one
  // per prompt; empty: options().sampling for all. A sample is the same
  // whatever the others' settings.
  Result<std::vector<RolloutSample>> Generate(const kernels::KernelCtx& ctx,
                                              std::span<const std::vector<int32_t>> prompts,
                                              RolloutStats* stats = nullptr,
                                              uint32_t first_request = 0,
                                              const std::function<bool()>& cancel = {},
                                              std::span<const SamplingConfig> sampling = {});

 private:
  const model::ForwardWeights& model_;
  RolloutOptions options_;
  std::unique_ptr<model::PackedLinear> packed_;  // pack_weights: before decoder_, which reads it
  model::Decoder decoder_;
  std::vector<Sampler> samplers_;  // one per thread: rows are sampled in parallel
  // A call's logits rows, kept for the next call (max(max_batch,
  // max_seq_len) x vocab floats held between calls: 8 MiB on tiny).
  std::vector<float> logits_;
};

// The log-probability of every completion token of each sample after its
// prompt (prompts[sample.request]), from the training forward (Llama::Logits
// of prompt + completion, in rows of the model's max_seq_len, padded, as many
// rows a call as the model holds and 64 MiB of logits allow) and the
// sampler's arithmetic. A sample that does not fit a row is an error.
// `head_input`, when set, also sees each call's LM-head input x [rows * t_len,
// C] (f32): samples [first, first + rows), row r holding sample first + r's
// prompt and completion from position 0, each row t_len positions long (PPO's
// values of the same positions, from the same forward).
using HeadInputFn =
    std::function<void(const float* x, size_t first, int64_t rows, int64_t t_len)>;
// `sampling`: the settings the samples were drawn with, one for all prompts
// or one per prompt (Generate's).
Result<std::vector<std::vector<double>>> RecomputeLogProbs(
    model::Llama& model, const kernels::KernelCtx& ctx,
    std::span<const std::vector<int32_t>> prompts, std::span<const RolloutSample> samples,
    std::span<const SamplingConfig> sampling, const HeadInputFn& head_input = nullptr);
inline Result<std::vector<std::vector<double>>> RecomputeLogProbs(
    model::Llama& model, const kernels::KernelCtx& ctx,
    std::span<const std::vector<int32_t>> prompts, std::span<const RolloutSample> samples,
    const SamplingConfig& sampling, const HeadInputFn& head_input = nullptr) {
  return RecomputeLogProbs(model, ctx, prompts, samples, std::span(&sampling, 1), head_input);
}

// RecomputeLogProbs' forward up to the head's input only, for a model whose
// LM head is never used (LlamaOptions::lm_head false: PPO's separate critic):
// `head_input` sees the same rows, as many a call as the model holds (rows
// are batch invariant: the features are those RecomputeLogProbs' calls give).
Status ForwardHeadInputs(model::Llama& model, const kernels::KernelCtx& ctx,
                         std::span<const std::vector<int32_t>> prompts,
                         std::span<const RolloutSample> samples, const HeadInputFn& head_input);

}  // namespace anvil::infer
