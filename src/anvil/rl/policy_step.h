// One RL step on a model, end to end: G rollouts of each prompt
// (infer::RolloutEngine), their rewards, advantages (GRPO's group-relative
// ones, REINFORCE's reward minus the step's mean, or PPO's by GAE from a
// value head), the policy's log-probabilities recomputed with the training
// forward (colocated, equal to the rollout's bit for bit: the step reports
// the largest difference, which must be 0, and every importance weight is 1),
// per-token weights (grpo.h), then `epochs` passes over the samples in
// `minibatches` contiguous shares, one forward/backward and AdamW update
// each. The first update's log-probabilities are those recomputed; each
// later one recomputes its share's under the weights it starts from, so the
// clip bounds how far the policy moves from the one that sampled.
//
// Rollouts from another policy than the trainer's (integer layers on purpose,
// RolloutOptions::linear, or a snapshot a step behind: async_rollouts.h) make
// the difference non-zero, and the sampler's log-probabilities weight each
// token by truncated importance sampling.
//
// The sampling must be the policy itself (temperature 1, no top-k/top-p):
// the training forward's cross-entropy is the untempered softmax.
//
// With a reference model (frozen, usually the starting policy) its
// log-probabilities of the kept samples give the k3 KL estimate, reported
// each step, and with kl_coef > 0 the KL penalty of the loss.
//
// PPO (advantage kGae) needs a critic: a value head on the policy's own
// features (value_head.h). A forward before the updates scores every
// completion position (V_old); GAE turns those values and the reward into
// per-token advantages and returns (ppo.h); each update adds vf_coef times
// the clipped value loss, whose gradient reaches the trunk through
// StepHooks::head_input, and steps the head's own AdamW at lr_ratio times
// the learning rate with the same clip scale (the global norm covers both).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/infer/rollout.h"
#include "anvil/optim/adamw.h"
#include "anvil/rl/grpo.h"
#include "anvil/rl/ppo.h"
#include "anvil/rl/value_head.h"

namespace anvil::rl {

class TrainerRanks;

struct PolicyStepConfig {
  PolicyLossConfig loss;
  PpoConfig ppo;        // loss.advantage kGae only
  int epochs = 1;       // passes over a step's samples
  int minibatches = 1;  // updates per pass
};

// A step's samples as the rollout engine drew them: from the policy itself
// (staleness 0), or from a snapshot `staleness` steps behind it
// (async_rollouts.h; a step is epochs x minibatches optimizer updates); each
// token's log-probability is the sampler's.
struct Rollouts {
  std::vector<infer::RolloutSample> samples;  // G of each prompt, in (prompt, sample) order
  infer::RolloutStats stats;
  infer::SamplingConfig sampling;  // what they were drawn with
  int group_size = 0;              // G
  int staleness = 0;
};

// Draws step `step`'s samples (requests step * prompts.size() + i) with
// `engine`, which must sample the policy itself: temperature 1, no top-k or
// top-p (the training forward's cross-entropy is the untempered softmax).
// `cancel`: as RolloutEngine::Generate's. A share of the step's prompts
// (trainer_ranks.h) gives the step's prompt count, `step_prompts`, and its
// first prompt's index: its requests are the whole step's.
Result<Rollouts> GenerateRollouts(infer::RolloutEngine& engine, const kernels::KernelCtx& ctx,
                                  std::span<const std::vector<int32_t>> prompts, int64_t step,
                                  const std::function<bool()>& cancel = {},
                                  int64_t step_prompts = -1, int64_t first_prompt = 0);

// PPO's critic: the value head and its optimizer, owned by the caller. The
// head reads the policy's own features (the trunk learns from the policy
// loss and vf_coef times the value loss), or, with `trunk`, the final
// features of a model of its own (a separate critic, usually started from
// the policy's checkpoint, built without its LM head: LlamaOptions lm_head
// false), which the value loss alone trains with `trunk_adamw`, clipped (with
// the head) on its own norm.
struct Critic {
  ValueHead* head = nullptr;
  optim::AdamW* adamw = nullptr;
  double lr_ratio = 1;  // the head's learning rate over the policy's
  model::Llama* trunk = nullptr;
  optim::AdamW* trunk_adamw = nullptr;
  double trunk_lr_ratio = 1;  // the critic model's learning rate over the policy's
};

struct PolicyStepResult {
  double mean_reward = 0;
  // Means over the step's updates:
  double loss = 0;
  double clip_fraction = 0;
  double kl = 0;  // mean k3 KL to the reference (0 without one)
  double grad_norm = 0;
  double tis_mean = 1;          // mean truncated importance weight (1: exact parity)
  double tis_truncated = 0;     // share of tokens whose weight was cut to the cap
  int updates = 0;              // optimizer steps taken
  int64_t tokens = 0;           // completion tokens trained on
  int64_t filtered_groups = 0;  // groups with equal rewards
  double max_logprob_diff = 0;  // rollout vs training forward: 0 when exact
  double rollout_kl = 0;        // mean (rollout - training) log-prob (k1 KL estimate): 0 too
  // PPO: the critic before the updates, and its loss over them.
  double value_mean = 0;          // mean V_old over the trained positions
  double explained_variance = 0;  // 1 - Var(return - V_old) / Var(return)
  double value_loss = 0;          // mean over the updates (before vf_coef)
  double value_clip_fraction = 0;
  int staleness = 0;  // steps between the sampler's weights and the trainer's
  // Of all the step's samples (kept or not):
  int64_t rollout_tokens = 0;  // completion tokens generated
  double mean_completion_tokens = 0;
  double entropy =
      0;  // mean -log p of the sampled tokens: the policy's entropy per token, estimated
  double rollout_seconds = 0;  // generating
  int64_t rollout_engine_bytes = 0;  // RolloutStats::engine_bytes
  double train_seconds = 0;    // recomputing log-probs, forward/backward and the updates
};

// Called once for each sample, on one trainer rank (trainer_ranks.h: the
// rank whose share of the samples holds it).
using RewardFn = std::function<double(int64_t request, const infer::RolloutSample& sample)>;

// The update from a step's rollouts (of `prompts`). `model` must hold
// prompts.size() * G rows of its max_seq_len (LlamaOptions max_batch);
// `adamw` updates its parameters. `reference`: null, or a model of the same
// shape (any max_batch) that is never updated. `critic`: for PPO
// (config.loss.advantage kGae) and only then. `ranks`: the ranks training
// together, each with the same rollouts (trainer_ranks.h; null: this
// process alone, each update in one forward/backward).
Result<PolicyStepResult> TrainOnRollouts(model::Llama& model, optim::AdamW& adamw, double lr,
                                         double grad_clip, const kernels::KernelCtx& ctx,
                                         std::span<const std::vector<int32_t>> prompts,
                                         const Rollouts& rollouts, const RewardFn& reward,
                                         const PolicyStepConfig& config,
                                         model::Llama* reference = nullptr,
                                         const Critic& critic = {}, TrainerRanks* ranks = nullptr);

// Colocated and on-policy: GenerateRollouts with `engine` over `model`'s own
// weights, then TrainOnRollouts.
Result<PolicyStepResult> PolicyStep(model::Llama& model, optim::AdamW& adamw, double lr,
                                    double grad_clip, int64_t step, const kernels::KernelCtx& ctx,
                                    infer::RolloutEngine& engine,
                                    std::span<const std::vector<int32_t>> prompts, int group_size,
                                    const RewardFn& reward, const PolicyStepConfig& config,
                                    model::Llama* reference = nullptr, const Critic& critic = {});

}  // namespace anvil::rl
