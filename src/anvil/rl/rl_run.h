// An RL run on a task (`anvil rl`): from a checkpoint (rl.init, usually an
// `anvil sft` run), each step takes rl.prompts_per_step train-split problems
// (step s: problems [s * P, (s + 1) * P)), draws rl.group_size samples of
// each from the policy itself (rollout engine, temperature 1), scores them
// with the task's reward (exact answer 1, well-formed answer
// rl.format_weight) and updates the policy (policy_step.h) by rl.algorithm:
// "grpo" (group-relative advantages), "reinforce" (reward minus the step's
// mean) or "ppo" (a value head on the policy's features, or with rl.critic =
// "separate" on a critic model of its own from rl.init trained at
// rl.critic_lr_ratio times the policy's learning rate; GAE with rl.gamma and
// rl.gae_lambda, value loss rl.vf_coef clipped at rl.value_clip), in
// rl.epochs passes of rl.minibatches updates (1 and 1: one on-policy
// update). Colocated (the default), the policy the rollouts sample and the
// one the trainer scores are the same weights in place, and their
// log-probabilities agree bit for bit: every step reports the largest
// difference, which is 0. The starting
// policy, frozen, is the reference of the reported KL (and of a penalty with
// rl.kl_coef > 0). With rl.rollout_quant = "w8a8" or "w4a8" the rollouts run
// through integer layers quantized from the current weights each step, a
// mismatch on purpose that truncated importance sampling corrects (grpo.h).
// With rl.max_staleness = 1 each step's successor's samples are drawn while
// it trains, from a snapshot one update behind (async_rollouts.h), on a
// thread or, under mpirun with two ranks, on the other rank. Held-out
// accuracy (task_eval.h) at the start, every rl.eval_every steps and at the
// end. PPO's value head (and separate critic) with their optimizer state,
// and the rollout snapshot, are saved in every checkpoint and restored on
// resume.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "anvil/comm/group.h"
#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/rl/policy_step.h"
#include "anvil/rl/post_run.h"

namespace anvil::rl {

struct RlStepMetrics {
  int64_t step = 0;  // steps done, this one included
  double lr = 0;
  PolicyStepResult policy;
  int64_t samples = 0;        // the step's
  double train_accuracy = 0;  // share of the step's samples answered exactly
  // The latest held-out accuracy (rl.eval_every) and the step it was
  // measured at (-1: none yet).
  double heldout_accuracy = 0;
  int64_t heldout_step = -1;
  double seconds = 0;         // the whole step
  bool ppo = false;           // the policy's value_* fields are set
  // The trainer's time without work: drawing the rollouts (colocated), or
  // waiting for the ones drawn beside the last step (asynchronous).
  double rollout_wait_seconds = 0;
  // rl.reward_command: samples whose command failed (reward 0), the first's reason.
  bool reward_command = false;
  int64_t reward_errors = 0;
  double reward_seconds = 0;  // running the commands (this rank's share)
  std::string reward_error;
};

struct RlHooks {
  PostRunHooks run;
  // Before the first step: the run's settings, the steps already done and
  // what each step does (e.g. "GRPO, 1 update a step").
  std::function<void(const PostRunConfig& config, int64_t first_step,
                     const std::string& algorithm)>
      on_start = nullptr;
  std::function<void(const RlStepMetrics&)> on_step = nullptr;
};

// The rank of a job of `world_size` ranks that draws the rollouts: the last
// one with rl.max_staleness = 1 under mpirun (ServeRollouts,
// remote_rollouts.h); -1 for none (every rank trains).
int RolloutRankOf(int64_t max_staleness, int world_size);

// `world`: the job under mpirun (null: this process alone); its ranks but
// RolloutRankOf's train together (options.trainers, trainer_ranks.h): the run
// of one process with rl.grad_accum = their count times theirs, bit for bit.
Result<PostRunSummary> RunRl(Config config, const PostRunOptions& options, const RlHooks& hooks,
                             comm::Group* world = nullptr);

}  // namespace anvil::rl
