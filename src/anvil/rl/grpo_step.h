// One on-policy GRPO step on a model, end to end: G rollouts of each prompt
// (infer::RolloutEngine), their rewards, group-relative advantages, the
// policy's log-probabilities recomputed with the training forward (equal to
// the rollout's bit for bit: the step reports the largest difference, which
// must be 0, so no importance correction is needed), per-token weights
// (grpo.h), one forward/backward with them and an AdamW update. With an
// engine that samples through quantized layers on purpose
// (RolloutOptions::linear) the difference is not 0, and the sampler's
// log-probabilities weight each token by truncated importance sampling.
//
// The sampling must be the policy itself (temperature 1, no top-k/top-p):
// the training forward's cross-entropy is the untempered softmax.
//
// With a reference model (frozen, usually the starting policy) its
// log-probabilities of the kept samples give the k3 KL estimate, reported
// each step, and with config.kl_coef > 0 the KL penalty of the loss.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/infer/rollout.h"
#include "anvil/optim/adamw.h"
#include "anvil/rl/grpo.h"

namespace anvil::rl {

struct GrpoStepResult {
  double mean_reward = 0;
  double loss = 0;
  double clip_fraction = 0;
  double kl = 0;                 // mean k3 KL to the reference (0 without one)
  double grad_norm = 0;
  int64_t tokens = 0;            // completion tokens trained on
  int64_t filtered_groups = 0;   // groups with equal rewards
  double max_logprob_diff = 0;   // rollout vs training forward: 0 when exact
  double rollout_kl = 0;         // mean (rollout - training) log-prob (k1 KL estimate): 0 too
  double tis_mean = 1;           // mean truncated importance weight (1: exact parity)
  double tis_truncated = 0;      // share of tokens whose weight was cut to the cap
  // Of all the step's samples (kept or not):
  int64_t rollout_tokens = 0;       // completion tokens generated
  double mean_completion_tokens = 0;
  double entropy = 0;  // mean -log p of the sampled tokens: the policy's entropy per token, estimated
  double rollout_seconds = 0;  // generating
  double train_seconds = 0;    // recomputing log-probs, forward/backward and the update
};

using RewardFn = std::function<double(int64_t request, const infer::RolloutSample& sample)>;

// `model` must hold prompts.size() * G rows of its max_seq_len (LlamaOptions
// max_batch); `adamw` updates its parameters; step `step` draws its samples
// from requests step * prompts.size() + i. `reference`: null, or a model of
// the same shape (any max_batch) that is never updated.
Result<GrpoStepResult> GrpoStep(model::Llama& model, optim::AdamW& adamw, double lr,
                                double grad_clip, int64_t step, const kernels::KernelCtx& ctx,
                                infer::RolloutEngine& engine,
                                std::span<const std::vector<int32_t>> prompts, int group_size,
                                const RewardFn& reward, const GrpoConfig& config,
                                model::Llama* reference = nullptr);

}  // namespace anvil::rl
