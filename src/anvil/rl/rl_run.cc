// RL runs on a task (rl_run.h).
#include "anvil/rl/rl_run.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "anvil/comm/world.h"
#include "anvil/core/child_groups.h"
#include "anvil/core/clock.h"
#include "anvil/core/file_util.h"
#include "anvil/infer/rollout.h"
#include "anvil/io/flat_shards.h"
#include "anvil/kernels/attention.h"
#include "anvil/model/int_linear.h"
#include "anvil/rl/async_rollouts.h"
#include "anvil/rl/remote_rollouts.h"
#include "anvil/rl/reward.h"
#include "anvil/rl/shared_outcome.h"
#include "anvil/rl/trainer_ranks.h"
#include "anvil/train/metrics.h"

namespace anvil::rl {
namespace {

struct RlRunConfig {
  int64_t prompts_per_step = 16;
  int64_t group_size = 8;
  int64_t rollout_batch = 0;  // sequences decoded together; 0: all of a step's samples
  // > 0: the rollouts' KV cache in pages of this many positions (a multiple
  // of kernels::kAttentionKvBlock), a prompt prefilled once for its G
  // samples (infer/rollout.h); 0: contiguous, each sample prefilling its
  // prompt. The same samples either way, bit for bit; shared, the shipped
  // job's rollouts ran 1.4-1.6x faster.
  int64_t page_rows = kernels::kAttentionKvBlock;
  double format_weight = 0.1;
  // A user's reward (reward.h's CommandReward) instead of the task's: the
  // command, its time limit a sample, and how many run at once. The task's
  // exact answers are still counted (train and held-out accuracy).
  std::string reward_command;
  double reward_timeout_s = 10;
  int64_t reward_at_once = 8;
  static constexpr int64_t kMaxRewardAtOnce = 256;
  // (each running command's group is tracked, so a second Ctrl-C kills it)
  static_assert(kMaxChildGroups >= kMaxRewardAtOnce);
  // The starting policy (rl.init) as a frozen reference: its k3 KL is
  // reported every step (rl.reference = true) and penalized with
  // rl.kl_coef > 0, which needs it.
  bool reference = true;
  // Rollouts through W8A8/W4A8 layers on purpose (rl.rollout_quant): a
  // mismatch the step corrects by truncated importance sampling (rl.tis_cap).
  model::WeightQuant rollout_quant = model::WeightQuant::kNone;
  std::string algorithm = "grpo";  // rl.algorithm as given
  PolicyStepConfig step;
  // 0: colocated, every step's samples from the weights it trains; 1: the
  // next step's samples drawn while this one trains (async_rollouts.h), on
  // rl.rollout_threads threads of their own beside the trainer's rl.threads
  // (the pools park idle workers, so 2 + 1 on 2 cores measured fastest).
  int64_t max_staleness = 0;
  // Rollouts also stop once a sample's text holds this (e.g. "\n": the
  // reward reads the answer up to its first newline); "": eos and max_new only.
  std::string stop;
  int64_t rollout_threads = 1;
  // Micro-batches per trainer rank and update (trainer_ranks.h): one process
  // with rl.grad_accum = S trains as S ranks with 1.
  int64_t grad_accum = 1;
  // Two ranks: the watchdog's limit on a wait for the other rank (its
  // training step, evaluation or checkpoint, or its draw), as `anvil train`'s.
  double comm_timeout_s = 600;
  // PPO: the value head's learning rate over the policy's (a critic usually
  // learns faster than its actor; it starts from zero).
  double value_lr_ratio = 10;
  // PPO's critic: "shared" (the value head reads the policy's features) or
  // "separate" (a model of its own from rl.init, trained by the value loss
  // alone at rl.critic_lr_ratio times the policy's learning rate).
  std::string critic = "shared";
  double critic_lr_ratio = 1;

  static Result<RlRunConfig> FromConfig(Config& config) {
    RlRunConfig c;
    ASSIGN_OR_RETURN(c.prompts_per_step, config.GetInt("rl.prompts_per_step", c.prompts_per_step));
    ASSIGN_OR_RETURN(c.group_size, config.GetInt("rl.group_size", c.group_size));
    // First: the checks below (minibatches) divide by these.
    if (c.prompts_per_step < 1 || c.prompts_per_step > 4096) {
      return InvalidArgument(
          fmt::format("rl.prompts_per_step = {}: expected 1..4096", c.prompts_per_step));
    }
    if (c.group_size < 2 || c.group_size > 256) {
      return InvalidArgument(
          fmt::format("rl.group_size = {}: expected 2..256 (advantages are relative to the group)",
                      c.group_size));
    }
    ASSIGN_OR_RETURN(c.rollout_batch, config.GetInt("rl.rollout_batch", c.rollout_batch));
    ASSIGN_OR_RETURN(c.page_rows, config.GetInt("rl.page_rows", c.page_rows));
    if (c.page_rows < 0 || c.page_rows % kernels::kAttentionKvBlock != 0 ||
        c.page_rows > (int64_t{1} << 20)) {
      return InvalidArgument(fmt::format(
          "rl.page_rows = {}: expected 0 (a contiguous KV cache) or a multiple of {} up to 2^20",
          c.page_rows, kernels::kAttentionKvBlock));
    }
    ASSIGN_OR_RETURN(c.format_weight, config.GetDouble("rl.format_weight", c.format_weight));
    ASSIGN_OR_RETURN(c.reward_command, config.GetString("rl.reward_command", c.reward_command));
    ASSIGN_OR_RETURN(c.reward_timeout_s,
                     config.GetDouble("rl.reward_timeout_s", c.reward_timeout_s));
    ASSIGN_OR_RETURN(c.reward_at_once, config.GetInt("rl.reward_at_once", c.reward_at_once));
    if (!(c.reward_timeout_s > 0 && c.reward_timeout_s <= 3600)) {
      return InvalidArgument(fmt::format(
          "rl.reward_timeout_s = {}: expected a time limit in (0, 3600] seconds a sample",
          c.reward_timeout_s));
    }
    if (c.reward_at_once < 1 || c.reward_at_once > kMaxRewardAtOnce) {
      return InvalidArgument(
          fmt::format("rl.reward_at_once = {}: expected 1..{} reward commands running at once",
                      c.reward_at_once, kMaxRewardAtOnce));
    }
    PolicyLossConfig& loss = c.step.loss;
    ASSIGN_OR_RETURN(loss.clip_low, config.GetDouble("rl.clip_low", loss.clip_low));
    ASSIGN_OR_RETURN(loss.clip_high, config.GetDouble("rl.clip_high", loss.clip_high));
    ASSIGN_OR_RETURN(loss.scale_by_std, config.GetBool("rl.scale_by_std", loss.scale_by_std));
    ASSIGN_OR_RETURN(c.algorithm, config.GetString("rl.algorithm", c.algorithm));
    const std::string& algorithm = c.algorithm;
    if (algorithm == "reinforce") {
      loss.advantage = AdvantageKind::kBatchBaseline;
    } else if (algorithm == "ppo") {
      loss.advantage = AdvantageKind::kGae;
    } else if (algorithm != "grpo") {
      return InvalidArgument(fmt::format(
          "rl.algorithm = \"{}\": expected \"grpo\" (group-relative advantages), "
          "\"reinforce\" (reward minus the step's mean reward) or \"ppo\" (a value head and GAE)",
          algorithm));
    }
    ASSIGN_OR_RETURN(const int64_t epochs, config.GetInt("rl.epochs", c.step.epochs));
    ASSIGN_OR_RETURN(const int64_t minibatches,
                     config.GetInt("rl.minibatches", c.step.minibatches));
    if (epochs < 1 || epochs > 64) {
      return InvalidArgument(
          fmt::format("rl.epochs = {}: expected 1..64 passes over a step's samples", epochs));
    }
    if (minibatches < 1 || minibatches > c.samples_per_step()) {
      return InvalidArgument(fmt::format(
          "rl.minibatches = {}: expected 1..{} (rl.prompts_per_step x rl.group_size samples a "
          "step)",
          minibatches, c.samples_per_step()));
    }
    c.step.epochs = static_cast<int>(epochs);
    c.step.minibatches = static_cast<int>(minibatches);
    PpoConfig& ppo = c.step.ppo;
    ASSIGN_OR_RETURN(ppo.gamma, config.GetDouble("rl.gamma", ppo.gamma));
    ASSIGN_OR_RETURN(ppo.lambda, config.GetDouble("rl.gae_lambda", ppo.lambda));
    ASSIGN_OR_RETURN(ppo.value_clip, config.GetDouble("rl.value_clip", ppo.value_clip));
    ASSIGN_OR_RETURN(ppo.vf_coef, config.GetDouble("rl.vf_coef", ppo.vf_coef));
    ASSIGN_OR_RETURN(ppo.whiten, config.GetBool("rl.whiten_advantages", ppo.whiten));
    ASSIGN_OR_RETURN(c.value_lr_ratio, config.GetDouble("rl.value_lr_ratio", c.value_lr_ratio));
    ASSIGN_OR_RETURN(c.critic, config.GetString("rl.critic", c.critic));
    ASSIGN_OR_RETURN(c.critic_lr_ratio,
                     config.GetDouble("rl.critic_lr_ratio", c.critic_lr_ratio));
    if ((c.critic != "shared" && c.critic != "separate") ||
        (c.critic == "separate" && algorithm != "ppo")) {
      return InvalidArgument(fmt::format(
          "rl.critic = \"{}\": expected \"shared\" (the value head on the policy's features) or "
          "\"separate\" (a critic model of its own; PPO only, here rl.algorithm = \"{}\")",
          c.critic, algorithm));
    }
    if (!(c.critic_lr_ratio > 0)) {
      return InvalidArgument(
          fmt::format("rl.critic_lr_ratio = {}: expected > 0", c.critic_lr_ratio));
    }
    ASSIGN_OR_RETURN(c.max_staleness, config.GetInt("rl.max_staleness", c.max_staleness));
    ASSIGN_OR_RETURN(c.stop, config.GetString("rl.stop", c.stop));
    ASSIGN_OR_RETURN(c.rollout_threads, config.GetInt("rl.rollout_threads", c.rollout_threads));
    ASSIGN_OR_RETURN(c.grad_accum, config.GetInt("rl.grad_accum", c.grad_accum));
    if (c.grad_accum < 1 || c.grad_accum > 1024) {
      return InvalidArgument(fmt::format(
          "rl.grad_accum = {}: expected 1..1024 micro-batches a rank and update", c.grad_accum));
    }
    ASSIGN_OR_RETURN(c.comm_timeout_s, config.GetDouble("comm.timeout_s", c.comm_timeout_s));
    if (!(c.comm_timeout_s > 0)) {
      return InvalidArgument(fmt::format("comm.timeout_s = {}: must be > 0", c.comm_timeout_s));
    }
    if (c.max_staleness < 0 || c.max_staleness > 1) {
      return InvalidArgument(fmt::format(
          "rl.max_staleness = {}: expected 0 (colocated) or 1 (the next step's rollouts drawn "
          "while this one trains)",
          c.max_staleness));
    }
    if (c.rollout_threads < 1 || c.rollout_threads > 1024) {
      return InvalidArgument(
          fmt::format("rl.rollout_threads = {}: expected 1..1024", c.rollout_threads));
    }
    if (!(c.value_lr_ratio > 0)) {
      return InvalidArgument(fmt::format("rl.value_lr_ratio = {}: expected > 0", c.value_lr_ratio));
    }
    // vf_coef also scales the value head's own gradient: 0 would leave the
    // critic at zero.
    if (!(ppo.gamma > 0 && ppo.gamma <= 1)) {
      return InvalidArgument(fmt::format("rl.gamma = {}: expected in (0, 1]", ppo.gamma));
    }
    if (!(ppo.lambda >= 0 && ppo.lambda <= 1)) {
      return InvalidArgument(fmt::format("rl.gae_lambda = {}: expected in [0, 1]", ppo.lambda));
    }
    if (!(ppo.value_clip >= 0)) {
      return InvalidArgument(fmt::format("rl.value_clip = {}: expected >= 0", ppo.value_clip));
    }
    if (!(ppo.vf_coef > 0)) {
      return InvalidArgument(fmt::format("rl.vf_coef = {}: expected > 0", ppo.vf_coef));
    }
    ASSIGN_OR_RETURN(loss.kl_coef, config.GetDouble("rl.kl_coef", loss.kl_coef));
    ASSIGN_OR_RETURN(const std::string quant, config.GetString("rl.rollout_quant", "none"));
    ASSIGN_OR_RETURN(c.rollout_quant, model::ParseWeightQuant(quant));
    ASSIGN_OR_RETURN(loss.tis_cap, config.GetDouble("rl.tis_cap", loss.tis_cap));
    if (!(loss.tis_cap >= 1)) {
      return InvalidArgument(fmt::format("rl.tis_cap = {}: expected >= 1", loss.tis_cap));
    }
    ASSIGN_OR_RETURN(c.reference, config.GetBool("rl.reference", c.reference));
    if (loss.kl_coef < 0 || (loss.kl_coef > 0 && !c.reference)) {
      return InvalidArgument(fmt::format(
          "rl.kl_coef = {}: expected >= 0, and a penalty needs rl.reference = true",
          loss.kl_coef));
    }
    if (c.rollout_batch < 0) {
      return InvalidArgument(fmt::format("rl.rollout_batch = {}: expected >= 0", c.rollout_batch));
    }
    if (!(c.format_weight >= 0 && c.format_weight < 1)) {
      return InvalidArgument(
          fmt::format("rl.format_weight = {}: expected in [0, 1)", c.format_weight));
    }
    if (!(loss.clip_low > 0 && loss.clip_low < 1)) {
      return InvalidArgument(fmt::format("rl.clip_low = {}: expected in (0, 1)", loss.clip_low));
    }
    if (!(loss.clip_high > 0)) {
      return InvalidArgument(fmt::format("rl.clip_high = {}: expected > 0", loss.clip_high));
    }
    return c;
  }
  int64_t samples_per_step() const { return prompts_per_step * group_size; }
};

// The first train-split problem of RL step 0. SFT walks the split from
// problem 0, sft.batch_size a step (2^32 is tens of millions of steps away),
// so the problems RL learns from are ones SFT never showed the policy.
constexpr uint64_t kFirstRlProblem = uint64_t{1} << 32;

// Which weights a model holds: the checksum of its f32 master weights, the
// same from any form of checkpoint (whole, sharded, an export).
std::string WeightsId(const model::Llama& model) {
  const std::span<const float> w = model.params().weights();
  return fmt::format("{:016x}", Fnv1a64(w.data(), w.size_bytes()));
}

const char* AlgorithmName(AdvantageKind kind) {
  switch (kind) {
    case AdvantageKind::kGroup: return "GRPO";
    case AdvantageKind::kBatchBaseline: return "REINFORCE";
    case AdvantageKind::kGae: return "PPO";
  }
  return "?";
}

constexpr const char* kValueHeadFile = "value_head.safetensors";
constexpr const char* kValueOptimizerFile = "value_head_optimizer.safetensors";
// rl.critic = "separate": the critic model's weights (one flat f32 file) and AdamW state.
constexpr const char* kCriticFile = "critic.safetensors";
// Its AdamW state: critic_optimizer.safetensors, or one file per trainer
// rank under rl.zero >= 1 (io::ShardFileName).
constexpr const char* kCriticOptimizerPrefix = "critic_optimizer";
// rl.max_staleness = 1: the weights the next step's samples are drawn from.
constexpr const char* kSnapshotFile = "rollout_snapshot.safetensors";

// The command's rewards of this rank's share of a step's samples
// (TrainOnRollouts asks for them by sample), indexed by request * G + sample.
// `cancel`: as CommandReward::ScoreAll's.
std::vector<RewardResult> ScoreShare(const CommandReward& command, int64_t at_once,
                                     std::span<const Problem> problems, const Rollouts& rollouts,
                                     const Policy& policy, const TrainerRanks& ranks,
                                     const std::function<bool()>& cancel) {
  const std::vector<infer::RolloutSample>& samples = rollouts.samples;
  const auto [first, last] = ranks.Share(static_cast<int64_t>(samples.size()));
  std::vector<std::string> texts;
  for (int64_t i = first; i < last; ++i) texts.push_back(policy.Text(samples[i].tokens));
  std::vector<RewardInput> inputs;
  for (int64_t i = first; i < last; ++i) {
    inputs.push_back({problems[samples[i].request].prompt, texts[i - first]});
  }
  const std::vector<RewardResult> results =
      command.ScoreAll(inputs, static_cast<int>(at_once), cancel);
  std::vector<RewardResult> scored(problems.size() * static_cast<size_t>(rollouts.group_size));
  for (int64_t i = first; i < last; ++i) {
    scored[samples[i].request * rollouts.group_size + samples[i].sample] = results[i - first];
  }
  return scored;
}

std::string StepJson(const RlStepMetrics& m) {
  const PolicyStepResult& g = m.policy;
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["lr"] = m.lr;
  j["reward"] = g.mean_reward;
  j["train_accuracy"] = m.train_accuracy;
  j["loss"] = g.loss;
  j["grad_norm"] = g.grad_norm;
  j["clip_fraction"] = g.clip_fraction;
  j["kl_reference"] = g.kl;
  j["entropy"] = g.entropy;
  j["response_tokens"] = g.mean_completion_tokens;
  j["trained_tokens"] = g.tokens;
  j["filtered_groups"] = g.filtered_groups;
  j["max_logprob_diff"] = g.max_logprob_diff;
  j["rollout_kl"] = g.rollout_kl;
  j["tis_mean"] = g.tis_mean;
  j["tis_truncated"] = g.tis_truncated;
  if (m.reward_command) {
    j["reward_errors"] = m.reward_errors;
    j["reward_seconds"] = m.reward_seconds;
  }
  j["updates"] = g.updates;
  j["staleness"] = g.staleness;
  j["rollout_wait_seconds"] = m.rollout_wait_seconds;
  if (m.ppo) {
    j["value_loss"] = g.value_loss;
    j["value_clip_fraction"] = g.value_clip_fraction;
    j["value_mean"] = g.value_mean;
    j["explained_variance"] = g.explained_variance;
  }
  // The rollout engine's own memory (on the rollout rank when it has one)
  // and this process's peak.
  j["rollout_engine_bytes"] = g.rollout_engine_bytes;
  j["mem_high_water"] = train::PeakRssBytes();
  j["rollout_tokens_per_s"] = static_cast<double>(g.rollout_tokens) / std::max(g.rollout_seconds, 1e-9);
  j["rollout_seconds"] = g.rollout_seconds;
  j["train_seconds"] = g.train_seconds;
  j["step_seconds"] = m.seconds;
  return j.dump();
}

}  // namespace

int RolloutRankOf(int64_t max_staleness, int world_size) {
  return max_staleness == 1 && world_size > 1 ? world_size - 1 : -1;
}

Result<PostRunSummary> RunRl(Config config, const PostRunOptions& options, const RlHooks& hooks,
                             comm::Group* world) {
  // (every trainer rank returns from a failed setup: one outcome for all)
  SetupAgreement setup(options.trainers, options.failed_in_setup);
  ASSIGN_OR_RETURN(const RlRunConfig gc, RlRunConfig::FromConfig(config));
  const int world_size = world != nullptr ? world->size() : 1;
  comm::Group* trainers = options.trainers;
  const int ranks = trainers != nullptr ? trainers->size() : 1;
  const int rollout_rank = RolloutRankOf(gc.max_staleness, world_size);
  if (world_size != ranks + (rollout_rank >= 0 ? 1 : 0) ||
      (trainers != nullptr && trainers->world_ranks()[0] != 0)) {
    return InvalidArgument(fmt::format(
        "{} trainer ranks of a job of {}: expected every rank to train (rl.max_staleness = 0) or "
        "all but the last, which draws the rollouts (rl.max_staleness = 1), world rank 0 first",
        ranks, world_size));
  }
  const bool leader = trainers == nullptr || trainers->rank() == 0;
  // Several ranks: one scoring its share of the samples keeps the others
  // waiting, and the watchdog ends a wait past comm.timeout_s.
  if (!gc.reward_command.empty() && world_size > 1) {
    const int64_t share = (gc.samples_per_step() + ranks - 1) / ranks;
    const int64_t rounds = (share + gc.reward_at_once - 1) / gc.reward_at_once;
    const double longest = static_cast<double>(rounds) * gc.reward_timeout_s;
    if (longest >= gc.comm_timeout_s) {
      return InvalidArgument(fmt::format(
          "rl.reward_timeout_s = {:g}: a trainer rank scores up to {} samples, {} at once "
          "(rl.reward_at_once), so a step's rewards may take {:g} s, past comm.timeout_s = {:g} "
          "after which a waiting rank ends the job: raise comm.timeout_s or rl.reward_at_once, or "
          "lower rl.reward_timeout_s",
          gc.reward_timeout_s, share, gc.reward_at_once, longest, gc.comm_timeout_s));
    }
  }
  // The rows a model holds: one slot's of an update (trainer_ranks.h), at
  // most; the recomputes go through them in as many calls as it takes.
  const int64_t model_rows = SlotRowsAtMost(gc.samples_per_step(), gc.step.minibatches,
                                            static_cast<int64_t>(ranks) * gc.grad_accum);
  ASSIGN_OR_RETURN(std::unique_ptr<PostRun> run,
                   PostRun::Create(std::move(config), "rl", options, model_rows,
                                   /*fresh=*/nullptr));
  const PostRunConfig& rc = run->config();
  // The weights the run started from (as loaded), recorded in its
  // checkpoints: a resume loads the KL reference from rl.init again, which
  // may have moved but must hold them still (not a later step of its run).
  // (A separate critic's weights come from the run's checkpoint.)
  const std::string init_weights = options.resume ? run->ResumedString("init_weights").value_or("")
                                                  : WeightsId(*run->policy().llama);
  if (gc.rollout_quant != model::WeightQuant::kNone && rc.precision != model::Precision::kF32) {
    return InvalidArgument("rl.rollout_quant quantizes an f32 policy: set rl.precision = \"f32\"");
  }
  // The task must fit the policy's context with room for an answer, every
  // step's problems (step_prompts' below): said up front with the problem's
  // text, not by the engine mid-run with a prompt's index.
  for (int64_t s = run->step(); s < rc.steps; ++s) {
    for (int64_t i = 0; i < gc.prompts_per_step; ++i) {
      const Problem p =
          MakeProblem(rc.task, Split::kTrain,
                      kFirstRlProblem + static_cast<uint64_t>(s * gc.prompts_per_step + i));
      const int64_t n = static_cast<int64_t>(run->policy().PromptTokens(p.prompt).size());
      if (n >= run->policy().config.max_seq_len) {
        return InvalidArgument(fmt::format(
            "the problem \"{}\" takes {} tokens as a prompt; model.max_seq_len = {} leaves no "
            "room for its answer (a smaller task, or a model with a longer context)",
            p.prompt, n, run->policy().config.max_seq_len));
      }
    }
  }
  RETURN_IF_ERROR(CheckHeldOutFits(run->policy(), rc.task, rc.eval_problems));
  RETURN_IF_ERROR(setup.Passed(run->Start()));
  Policy& policy = run->policy();
  const kernels::KernelCtx& ctx = *policy.ctx;
  const int64_t rollout_batch = gc.rollout_batch > 0
                                    ? std::min(gc.rollout_batch, gc.samples_per_step())
                                    : gc.samples_per_step();
  infer::RolloutOptions engine_options{.max_batch = rollout_batch,
                                       .max_new = rc.max_new,
                                       .samples = static_cast<int>(gc.group_size),
                                       .eos = policy.eos(),
                                       .sampling = {.temperature = 1,
                                                    .top_k = 0,
                                                    .top_p = 1,
                                                    .seed = static_cast<uint64_t>(rc.seed)},
                                       .page_rows = gc.page_rows};
  if (!gc.stop.empty()) {
    engine_options.stop = {gc.stop};
    engine_options.token_text = [&policy](int32_t token) {
      return policy.tokenizer.TokenText(token);
    };
  }
  // Colocated: an engine over the policy's own weights (and integer layers
  // requantized from them each step). Asynchronous: a snapshot's, drawn on
  // a thread of its own, kept in every checkpoint.
  std::unique_ptr<model::IntLinear> quantized;
  std::unique_ptr<infer::RolloutEngine> engine;
  std::unique_ptr<RolloutsAhead> async;
  if (ranks > 1) {
    comm::SetWatchdogTimeout(gc.comm_timeout_s);
    RETURN_IF_ERROR(CheckSameKernels(*trainers, policy.Kernels()));
  }
  if (gc.max_staleness == 0) {
    infer::RolloutOptions o = engine_options;
    if (gc.rollout_quant != model::WeightQuant::kNone) {
      quantized = std::make_unique<model::IntLinear>(
          policy.llama->forward_weights(), gc.rollout_quant,
          std::max(rollout_batch, policy.config.max_seq_len), ctx);
      o.linear = quantized.get();
    }
    engine = std::make_unique<infer::RolloutEngine>(policy.llama->forward_weights(), o);
  } else if (leader) {  // the other trainer ranks receive its rollouts
    const int threads = static_cast<int>(gc.rollout_threads);
    if (rollout_rank >= 0) {  // on a rank of their own (remote_rollouts.h), the same draws
      ASSIGN_OR_RETURN(async, RemoteRollouts::Create(*world, rollout_rank, policy, engine_options,
                                                     gc.rollout_quant, threads, gc.comm_timeout_s));
      if (hooks.run.on_message) {
        hooks.run.on_message(fmt::format("rollouts drawn on rank {} ({} thread{})", rollout_rank,
                                         threads, threads == 1 ? "" : "s"));
      }
    } else {
      async = std::make_unique<AsyncRollouts>(policy, engine_options, gc.rollout_quant, threads);
    }
    if (options.resume) {  // the weights the next step's samples come from
      const std::string path = run->loaded_from() + "/" + kSnapshotFile;
      if (const Status s = async->LoadSnapshot(path); !s.ok()) {
        return DataLoss(fmt::format(
            "resuming with rl.max_staleness = 1 needs the run's rollout snapshot: {}",
            s.message()));
      }
    }
    run->SaveAlso([&](const std::string& dir) {
      return async->SaveSnapshot(dir + "/" + kSnapshotFile);
    });
  }
  // PPO's critic: a value head on the policy's features, zero in a new run,
  // the run's own in a resumed one, saved beside the policy in every
  // checkpoint.
  std::unique_ptr<ValueHead> value_head;
  std::unique_ptr<optim::AdamW> value_adamw;
  Critic critic;
  if (gc.step.loss.advantage == AdvantageKind::kGae) {
    value_head = std::make_unique<ValueHead>(policy.config.dim);
    const int64_t size = value_head->dim() + 1;
    value_adamw = std::make_unique<optim::AdamW>(
        rc.optim, std::vector<optim::ParamGroup>{{.offset = 0, .numel = size, .decay = false}},
        size);
    if (options.resume) {
      const std::string& dir = run->loaded_from();
      const std::string moments = dir + "/" + kValueOptimizerFile;
      Status loaded = value_head->Load(dir + "/" + kValueHeadFile);
      if (loaded.ok()) loaded = value_adamw->Load(std::span<const std::string>(&moments, 1));
      if (!loaded.ok()) {
        return DataLoss(fmt::format("resuming PPO needs the run's value head: {}",
                                    loaded.message()));
      }
    }
    critic = {value_head.get(), value_adamw.get(), gc.value_lr_ratio};
    run->SaveAlso([&](const std::string& dir) -> Status {
      RETURN_IF_ERROR(value_head->Save(dir + "/" + kValueHeadFile));
      return value_adamw->Save(dir + "/" + kValueOptimizerFile);
    });
  }
  // A separate critic: a model of its own, from rl.init in a new run, the
  // run's own in a resumed one, saved beside the policy.
  std::unique_ptr<model::Llama> critic_model;
  std::unique_ptr<optim::AdamW> critic_adamw;
  if (gc.critic == "separate") {
    ASSIGN_OR_RETURN(critic_model, LoadReference(rc.init, policy, model_rows,
                                                 /*lm_head=*/false));
    model::LlamaParams& cp = critic_model->params();
    critic_adamw =
        std::make_unique<optim::AdamW>(rc.optim, optim::LlamaParamGroups(cp, /*lm_head=*/false),
                                       cp.size(), run->OptimizerShard(cp.size()));
    if (options.resume) {
      const std::string& dir = run->loaded_from();
      // fp8-delayed: with the critic's own amax histories (in the file's metadata).
      std::vector<double> delayed;
      model::Fp8DelayedScaling* scales = critic_model->fp8_delayed();
      Status loaded = LoadSnapshotFile(dir + "/" + kCriticFile, cp.weights(),
                                       scales != nullptr ? &delayed : nullptr);
      if (loaded.ok() && scales != nullptr && !scales->Restore(delayed)) {
        loaded = DataLoss(
            fmt::format("{}/{}: fp8-delayed scales that do not fit the critic", dir, kCriticFile));
      }
      if (loaded.ok()) {
        const std::vector<std::string> moments = io::ShardFiles(dir, kCriticOptimizerPrefix);
        loaded =
            moments.empty()
                ? NotFound(fmt::format("{}/{}.safetensors: missing", dir, kCriticOptimizerPrefix))
                : critic_adamw->Load(moments);
      }
      if (!loaded.ok()) {
        return DataLoss(fmt::format("resuming PPO with a separate critic needs its model: {}",
                                    loaded.message()));
      }
      critic_model->RefreshBf16Weights(ctx);
    }
    critic.trunk = critic_model.get();
    critic.trunk_adamw = critic_adamw.get();
    critic.trunk_lr_ratio = gc.critic_lr_ratio;
    run->SaveAlso([&](const std::string& dir) -> Status {
      return SaveSnapshotFile(dir + "/" + kCriticFile, critic_model->params().weights(),
                              DelayedState(*critic_model));
    });
    run->SaveFromEveryRank([&](const std::string& dir, int rank, int ranks) -> Status {
      return critic_adamw->Save(dir + "/" + io::ShardFileName(kCriticOptimizerPrefix, rank, ranks));
    });
  }
  std::unique_ptr<model::Llama> reference;
  if (gc.reference) {
    ASSIGN_OR_RETURN(reference, LoadReference(rc.init, policy, model_rows));
    if (const std::string now = WeightsId(*reference);
        options.resume && !init_weights.empty() && now != init_weights) {
      return InvalidArgument(fmt::format(
          "rl.init = {} holds other weights (id {}) than the run started from (id {}); the KL "
          "reference loads from it: point rl.init at the checkpoint the run started from",
          rc.init, now, init_weights));
    }
  }
  // The trainer ranks and each update's slots: the run's bits depend on
  // their count (trainer_ranks.h), recorded in its checkpoints.
  std::unique_ptr<comm::Group> alone;
  if (trainers == nullptr) {
    alone = comm::MakeLocalGroup("trainer");
    trainers = alone.get();
  }
  TrainerRanks trainer_ranks(*trainers, static_cast<int>(gc.grad_accum), run->zero_stage(),
                             *policy.llama, critic_model.get(), ctx.pool());
  run->SetTrainerSlots(ranks, trainer_ranks.grad_accum(), "update", hooks.run);
  if (hooks.on_start) {
    const int updates = gc.step.epochs * gc.step.minibatches;
    hooks.on_start(rc, run->first_step(),
                   fmt::format("{}{} ({} update{} a step)", AlgorithmName(gc.step.loss.advantage),
                               critic_model ? " with a separate critic" : "", updates,
                               updates == 1 ? "" : "s"));
  }

  // Step s's problems: train-split problems [s * P, (s + 1) * P) from kFirstRlProblem.
  auto step_prompts = [&](int64_t s, std::vector<Problem>* problems) {
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t i = 0; i < gc.prompts_per_step; ++i) {
      const Problem p = MakeProblem(
          rc.task, Split::kTrain,
          kFirstRlProblem + static_cast<uint64_t>(s * gc.prompts_per_step + i));
      prompts.push_back(policy.PromptTokens(p.prompt));
      if (problems != nullptr) problems->push_back(p);
    }
    return prompts;
  };
  // fp8-delayed: a policy loaded without amax histories (a checkpoint of
  // another precision) starts them from the first step's prompts, and the
  // reference, frozen, keeps the init checkpoint's or starts them so too
  // (the scales the policy had at step 0, in a resumed run as well).
  if (StartDelayedScales(*policy.llama, ctx, step_prompts(0, nullptr))) {
    if (async) async->Snapshot(*policy.llama);  // the first draw's scales
    if (hooks.run.on_message) {
      hooks.run.on_message(fmt::format(
          "fp8-delayed: the amax histories start from a forward of the first step's {} prompts",
          gc.prompts_per_step));
    }
  }
  if (reference) StartDelayedScales(*reference, ctx, step_prompts(0, nullptr));
  // A separate critic trains: its histories start so (or come from its
  // checkpoint file) and then follow its own updates.
  if (critic_model) StartDelayedScales(*critic_model, ctx, step_prompts(0, nullptr));

  // A resume may change the reward (a fixed script, say), but its steps from
  // here then optimize another objective: said.
  if (options.resume && hooks.run.on_message) {
    ASSIGN_OR_RETURN(Config saved, Config::FromFile(run->loaded_from() + "/config.toml"));
    ASSIGN_OR_RETURN(const std::string before, saved.GetString("rl.reward_command", ""));
    if (before != gc.reward_command) {
      hooks.run.on_message(fmt::format(
          "note: the run's rewards came from {}, now from {}: its steps from here optimize "
          "another reward",
          before.empty() ? "the task" : "`" + before + "`",
          gc.reward_command.empty() ? "the task" : "`" + gc.reward_command + "`"));
    }
  }
  std::optional<CommandReward> command;
  if (!gc.reward_command.empty()) {
    command.emplace(gc.reward_command, gc.reward_timeout_s);
    if (hooks.run.on_message) {
      hooks.run.on_message(fmt::format(
          "rewards from `{}` ({:g} s a sample at most, {} at once; train accuracy counts the "
          "task's exact answers)",
          gc.reward_command, gc.reward_timeout_s, gc.reward_at_once));
    }
  }
  // The held-out accuracy at the start: a resumed run's as its checkpoints
  // recorded it (one stopped in its first step resumes at step 0), or
  // measured now (a stop request may cut it: the run then stops, and its
  // resume measures it again).
  std::optional<TaskEval> first_eval;
  bool start_made_up = false;  // a resumed run's, cut before: its checkpoint is written again
  if (const std::optional<double> a = run->ResumedNumber("heldout_accuracy_at_start")) {
    first_eval.emplace();
    first_eval->accuracy = *a;
  } else if (run->step() == 0) {
    Result<TaskEval> e = run->Evaluate(hooks.run);
    if (e.ok()) {
      first_eval = *e;
      start_made_up = options.resume;
    } else if (e.status().code() != StatusCode::kCancelled) {
      return e.status();
    }
  }
  std::string extra_state;
  if (!init_weights.empty()) extra_state = fmt::format("\"init_weights\": \"{}\"", init_weights);
  if (first_eval) {
    if (!extra_state.empty()) extra_state += ",\n  ";
    extra_state += fmt::format("\"heldout_accuracy_at_start\": {}", first_eval->accuracy);
  }
  run->SetExtraState(extra_state);
  run->SetEvaluationState(
      [](const TaskEval& e) { return fmt::format("\"heldout_accuracy\": {}", e.accuracy); });
  if (start_made_up) RETURN_IF_ERROR(run->Save().status());
  RETURN_IF_ERROR(run->MakeUpEvaluation(hooks.run));  // (its checkpoint holds extra_state)
  if (async && run->step() < rc.steps && !run->stop_agreed()) {  // the first step's samples
    async->Start(step_prompts(run->step(), nullptr), run->step(), run->step() == 0 ? 0 : 1);
  }
  std::vector<Problem> problems;
  while (!run->Done(hooks.run)) {
    Stopwatch watch;
    const int64_t step = run->step();
    // The next step's samples from the weights this step trains from, drawn
    // while it trains. With a reward command, once its rewards are in: until
    // then the snapshot is still the one this step's samples came from, which
    // the checkpoint of a run stopped during them must keep (a resumed run
    // draws them again from it). The commands' seconds dwarf a draw's.
    auto draw_next_step = [&] {
      async->Snapshot(*policy.llama);
      if (step + 1 < rc.steps) async->Start(step_prompts(step + 1, nullptr), step + 1, 1);
    };
    problems.clear();
    const std::vector<std::vector<int32_t>> prompts = step_prompts(step, &problems);
    int64_t correct = 0;
    RlStepMetrics m;
    Rollouts rollouts;
    // With a reward command: this rank's share of the samples scored up
    // front, several commands at once (by request * G + sample).
    std::vector<RewardResult> scored;
    const RewardFn reward = [&](int64_t request, const infer::RolloutSample& s) {
      const std::string text = policy.Text(s.tokens);
      RewardResult r = TaskReward(rc.task.task, problems[request], text, gc.format_weight);
      correct += r.correct;
      if (!command) return r.reward;
      const RewardResult& c = scored[request * rollouts.group_size + s.sample];
      if (!c.error.empty()) {
        ++m.reward_errors;
        if (m.reward_error.empty()) m.reward_error = c.error;
      }
      return c.reward;
    };
    m.ppo = critic.head != nullptr;
    m.reward_command = command.has_value();
    m.samples = gc.samples_per_step();
    m.lr = run->LrAt(step);
    if (gc.max_staleness == 1) {
      Stopwatch wait;
      Status drawn = Status::Ok();
      if (async) {  // trainer rank 0
        Result<Rollouts> r = async->Wait();
        if (r.ok()) {
          rollouts = std::move(*r);
          if (!command) draw_next_step();
        } else {
          drawn = r.status();
        }
      }
      if (ranks > 1) {  // rank 0's rollouts, or its failure, on every trainer rank
        int failed = drawn.ok() ? 0 : 1;
        trainers->Broadcast(std::span<int>(&failed, 1), 0);
        if (failed != 0 && drawn.ok()) drawn = Aborted("trainer rank 0 received no rollouts");
        if (drawn.ok()) BroadcastRollouts(*trainers, 0, rollouts);
      }
      RETURN_IF_ERROR(drawn);
      m.rollout_wait_seconds = wait.Seconds();
    } else {
      if (quantized) quantized->Requantize(policy.llama->forward_weights(), ctx);
      // A stop request cuts the draw and drops the step, as during rewards.
      Result<Rollouts> drawn =
          GenerateShared(*engine, ctx, prompts, step, trainer_ranks, hooks.run.stop_requested);
      if (drawn.status().code() == StatusCode::kCancelled) {
        run->StopInStep(hooks.run, "its rollouts");
        break;
      }
      RETURN_IF_ERROR(drawn.status());
      rollouts = std::move(*drawn);
      m.rollout_wait_seconds = rollouts.stats.seconds;
    }
    if (command) {
      Stopwatch scoring;
      // A stop request kills the commands in flight and drops the step: a
      // resumed run draws the same samples again (they depend on the weights,
      // the seed and the step only; asynchronous, on the snapshot the
      // checkpoint keeps).
      scored = ScoreShare(*command, gc.reward_at_once, problems, rollouts, policy, trainer_ranks,
                          hooks.run.stop_requested);
      m.reward_seconds = scoring.Seconds();
      int dropped = std::any_of(scored.begin(), scored.end(),
                                [](const RewardResult& r) { return r.cancelled; });
      if (ranks > 1) dropped = trainers->AllReduceValue(dropped, comm::ReduceOp::kMax);
      if (dropped != 0) {
        run->StopInStep(hooks.run, "its rewards");
        break;
      }
      if (async) draw_next_step();
    }
    ASSIGN_OR_RETURN(m.policy, TrainOnRollouts(*policy.llama, run->adamw(), m.lr,
                                               rc.optim.grad_clip, ctx, prompts, rollouts, reward,
                                               gc.step, reference.get(), critic, &trainer_ranks));
    run->StepDone();
    m.step = run->step();
    correct = trainers->AllReduceValue(correct);  // each rank scored its share
    if (command) {                                // (every rank has one, or none)
      m.reward_errors = trainers->AllReduceValue(m.reward_errors);
      if (m.reward_errors > 0 && m.reward_error.empty()) m.reward_error = "(on another rank)";
    }
    m.train_accuracy =
        static_cast<double>(correct) / static_cast<double>(gc.samples_per_step());
    if (run->last_eval()) {
      m.heldout_accuracy = run->last_eval()->accuracy;
      m.heldout_step = run->last_eval_step();
    }
    m.seconds = watch.Seconds();
    if (leader) run->metrics().WriteJsonLine(StepJson(m));
    if (hooks.on_step) hooks.on_step(m);
    RETURN_IF_ERROR(run->AfterStep(hooks.run));
  }
  // A run stopped early (time, Ctrl-C) has the next step's draw in flight:
  // drop it (on a thread, without waiting for it; the checkpoint keeps its
  // snapshot).
  if (async) async->Cancel();
  ASSIGN_OR_RETURN(PostRunSummary summary, run->Finish(hooks.run));
  summary.first_eval = first_eval;
  return summary;
}

}  // namespace anvil::rl
