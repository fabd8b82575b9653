// GRPO runs on a task (grpo_run.h).
#include "anvil/rl/grpo_run.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/infer/rollout.h"
#include "anvil/model/int_linear.h"
#include "anvil/rl/reward.h"

namespace anvil::rl {
namespace {

struct GrpoRunConfig {
  int64_t prompts_per_step = 16;
  int64_t group_size = 8;
  int64_t rollout_batch = 0;  // sequences decoded together; 0: all of a step's samples
  double format_weight = 0.1;
  // The starting policy (rl.init) as a frozen reference: its k3 KL is
  // reported every step (rl.reference = true) and penalized with
  // rl.kl_coef > 0, which needs it.
  bool reference = true;
  // Rollouts through W8A8/W4A8 layers on purpose (rl.rollout_quant): a
  // mismatch the step corrects by truncated importance sampling (rl.tis_cap).
  model::WeightQuant rollout_quant = model::WeightQuant::kNone;
  GrpoConfig grpo;

  static Result<GrpoRunConfig> FromConfig(Config& config) {
    GrpoRunConfig c;
    ASSIGN_OR_RETURN(c.prompts_per_step, config.GetInt("rl.prompts_per_step", c.prompts_per_step));
    ASSIGN_OR_RETURN(c.group_size, config.GetInt("rl.group_size", c.group_size));
    ASSIGN_OR_RETURN(c.rollout_batch, config.GetInt("rl.rollout_batch", c.rollout_batch));
    ASSIGN_OR_RETURN(c.format_weight, config.GetDouble("rl.format_weight", c.format_weight));
    ASSIGN_OR_RETURN(c.grpo.clip_low, config.GetDouble("rl.clip_low", c.grpo.clip_low));
    ASSIGN_OR_RETURN(c.grpo.clip_high, config.GetDouble("rl.clip_high", c.grpo.clip_high));
    ASSIGN_OR_RETURN(c.grpo.scale_by_std, config.GetBool("rl.scale_by_std", c.grpo.scale_by_std));
    ASSIGN_OR_RETURN(const std::string algorithm, config.GetString("rl.algorithm", "grpo"));
    if (algorithm == "reinforce") {
      c.grpo.advantage = AdvantageKind::kBatchBaseline;
    } else if (algorithm != "grpo") {
      return InvalidArgument(fmt::format(
          "rl.algorithm = \"{}\": expected \"grpo\" (group-relative advantages) or "
          "\"reinforce\" (reward minus the step's mean reward)",
          algorithm));
    }
    ASSIGN_OR_RETURN(c.grpo.kl_coef, config.GetDouble("rl.kl_coef", c.grpo.kl_coef));
    ASSIGN_OR_RETURN(const std::string quant, config.GetString("rl.rollout_quant", "none"));
    ASSIGN_OR_RETURN(c.rollout_quant, model::ParseWeightQuant(quant));
    ASSIGN_OR_RETURN(c.grpo.tis_cap, config.GetDouble("rl.tis_cap", c.grpo.tis_cap));
    if (!(c.grpo.tis_cap >= 1)) {
      return InvalidArgument(fmt::format("rl.tis_cap = {}: expected >= 1", c.grpo.tis_cap));
    }
    ASSIGN_OR_RETURN(c.reference, config.GetBool("rl.reference", c.reference));
    if (c.grpo.kl_coef < 0 || (c.grpo.kl_coef > 0 && !c.reference)) {
      return InvalidArgument(fmt::format(
          "rl.kl_coef = {}: expected >= 0, and a penalty needs rl.reference = true",
          c.grpo.kl_coef));
    }
    if (c.prompts_per_step < 1 || c.prompts_per_step > 4096 || c.group_size < 2 ||
        c.group_size > 256) {
      return InvalidArgument(fmt::format(
          "rl.prompts_per_step = {} (1..4096) and rl.group_size = {} (2..256: advantages are "
          "relative to the group)",
          c.prompts_per_step, c.group_size));
    }
    if (c.rollout_batch < 0 || c.format_weight < 0 || c.format_weight >= 1 ||
        c.grpo.clip_low <= 0 || c.grpo.clip_low >= 1 || c.grpo.clip_high <= 0) {
      return InvalidArgument(fmt::format(
          "rl.rollout_batch = {} (>= 0), rl.format_weight = {} ([0, 1)), rl.clip_low = {} "
          "((0, 1)), rl.clip_high = {} (> 0)",
          c.rollout_batch, c.format_weight, c.grpo.clip_low, c.grpo.clip_high));
    }
    return c;
  }
  int64_t samples_per_step() const { return prompts_per_step * group_size; }
};

// The first train-split problem of RL step 0. SFT walks the split from
// problem 0, sft.batch_size a step (2^32 is tens of millions of steps away),
// so the problems RL learns from are ones SFT never showed the policy.
constexpr uint64_t kFirstRlProblem = uint64_t{1} << 32;

std::string StepJson(const RlStepMetrics& m) {
  const GrpoStepResult& g = m.grpo;
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
  j["rollout_tokens_per_s"] = static_cast<double>(g.rollout_tokens) / std::max(g.rollout_seconds, 1e-9);
  j["rollout_seconds"] = g.rollout_seconds;
  j["train_seconds"] = g.train_seconds;
  j["step_seconds"] = m.seconds;
  return j.dump();
}

}  // namespace

Result<PostRunSummary> RunGrpo(Config config, const PostRunOptions& options, const RlHooks& hooks) {
  ASSIGN_OR_RETURN(const GrpoRunConfig gc, GrpoRunConfig::FromConfig(config));
  ASSIGN_OR_RETURN(std::unique_ptr<PostRun> run,
                   PostRun::Create(std::move(config), "rl", options, gc.samples_per_step(),
                                   /*fresh=*/nullptr));
  RETURN_IF_ERROR(run->Start());
  const PostRunConfig& rc = run->config();
  Policy& policy = run->policy();
  const kernels::KernelCtx& ctx = *policy.ctx;
  const int64_t rollout_batch = gc.rollout_batch > 0
                                    ? std::min(gc.rollout_batch, gc.samples_per_step())
                                    : gc.samples_per_step();
  std::unique_ptr<model::IntLinear> quantized;
  if (gc.rollout_quant != model::WeightQuant::kNone) {
    if (rc.precision != model::Precision::kF32) {
      return InvalidArgument("rl.rollout_quant quantizes an f32 policy: set rl.precision = \"f32\"");
    }
    quantized = std::make_unique<model::IntLinear>(
        *policy.llama, gc.rollout_quant,
        std::max(rollout_batch, policy.config.max_seq_len), ctx);
  }
  infer::RolloutEngine engine(
      *policy.llama, {.max_batch = rollout_batch,
                      .max_new = rc.max_new,
                      .samples = static_cast<int>(gc.group_size),
                      .eos = policy.eos(),
                      .sampling = {.temperature = 1, .top_k = 0, .top_p = 1,
                                   .seed = static_cast<uint64_t>(rc.seed)},
                      .linear = quantized.get()});
  std::unique_ptr<model::Llama> reference;
  if (gc.reference) {
    ASSIGN_OR_RETURN(reference, LoadReference(rc.init, policy, gc.samples_per_step()));
  }
  if (hooks.on_start) hooks.on_start(rc, run->first_step());

  std::optional<TaskEval> first_eval;  // a resumed run's was printed by its first session
  if (run->step() == 0) {
    ASSIGN_OR_RETURN(first_eval, run->Evaluate(hooks.run));
  }
  std::vector<Problem> problems;
  std::vector<std::vector<int32_t>> prompts;
  while (!run->Done(hooks.run)) {
    Stopwatch watch;
    problems.clear();
    prompts.clear();
    for (int64_t i = 0; i < gc.prompts_per_step; ++i) {
      problems.push_back(MakeProblem(
          rc.task, Split::kTrain,
          kFirstRlProblem + static_cast<uint64_t>(run->step() * gc.prompts_per_step + i)));
      prompts.push_back(policy.PromptTokens(problems.back().prompt));
    }
    int64_t correct = 0;
    const RewardFn reward = [&](int64_t request, const infer::RolloutSample& s) {
      const RewardResult r =
          TaskReward(rc.task.task, problems[request], policy.Text(s.tokens), gc.format_weight);
      correct += r.correct;
      return r.reward;
    };
    if (quantized) quantized->Requantize(*policy.llama, ctx);  // last step's weights
    RlStepMetrics m;
    m.lr = run->LrAt(run->step());
    ASSIGN_OR_RETURN(m.grpo, GrpoStep(*policy.llama, run->adamw(), m.lr, rc.optim.grad_clip,
                                      run->step(), ctx, engine, prompts,
                                      static_cast<int>(gc.group_size), reward, gc.grpo,
                                      reference.get()));
    run->StepDone();
    m.step = run->step();
    m.train_accuracy =
        static_cast<double>(correct) / static_cast<double>(gc.samples_per_step());
    m.seconds = watch.Seconds();
    run->metrics().WriteJsonLine(StepJson(m));
    if (hooks.on_step) hooks.on_step(m);
    RETURN_IF_ERROR(run->AfterStep(hooks.run));
  }
  ASSIGN_OR_RETURN(PostRunSummary summary,
                   run->Finish(hooks.run, [&](const TaskEval& e) {
                     std::string extra = fmt::format("\"heldout_accuracy\": {}", e.accuracy);
                     if (first_eval) {
                       extra += fmt::format(",\n  \"heldout_accuracy_at_start\": {}",
                                            first_eval->accuracy);
                     }
                     return extra;
                   }));
  summary.first_eval = first_eval;
  return summary;
}

}  // namespace anvil::rl
