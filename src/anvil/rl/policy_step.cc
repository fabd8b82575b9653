// One on-policy RL step (policy_step.h).
#include "anvil/rl/policy_step.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "anvil/core/clock.h"
#include "anvil/profile/trace.h"

namespace anvil::rl {
namespace {

Status CheckSampling(const infer::SamplingConfig& sampling) {
  if (sampling.greedy || sampling.temperature != 1.0 || sampling.top_k != 0 ||
      sampling.top_p != 1.0) {
    return InvalidArgument(
        "RL samples from the policy itself: temperature 1, top_k 0, top_p 1, not greedy");
  }
  return Status::Ok();
}

Status CheckStep(const Rollouts& rollouts, size_t prompts, const PolicyStepConfig& config,
                 const model::Llama* reference, const Critic& critic) {
  RETURN_IF_ERROR(CheckSampling(rollouts.sampling));
  if (rollouts.group_size < 1 ||
      rollouts.samples.size() != prompts * static_cast<size_t>(rollouts.group_size)) {
    return InvalidArgument(fmt::format("{} samples of {} prompts in groups of {}",
                                       rollouts.samples.size(), prompts, rollouts.group_size));
  }
  const PolicyLossConfig& loss = config.loss;
  if (loss.kl_coef != 0 && reference == nullptr) {
    return InvalidArgument("a KL penalty (kl_coef != 0) needs a reference model");
  }
  if (loss.kl_coef < 0) return InvalidArgument("kl_coef must be >= 0");
  const bool ppo = loss.advantage == AdvantageKind::kGae;
  if (ppo != (critic.head != nullptr && critic.adamw != nullptr)) {
    return InvalidArgument(
        "PPO's advantages need a critic (a value head and its optimizer), "
        "and only PPO takes one");
  }
  if ((critic.trunk != nullptr) != (critic.trunk_adamw != nullptr) ||
      (critic.trunk != nullptr && !ppo)) {
    return InvalidArgument(
        "a separate critic needs its model and that model's optimizer, and PPO");
  }
  if (critic.trunk != nullptr && critic.trunk->options().lm_head) {
    return InvalidArgument(
        "a separate critic's model must be built without its LM head (LlamaOptions lm_head "
        "false): only the value head reads its features");
  }
  if (config.epochs < 1 || config.minibatches < 1) {
    return InvalidArgument(fmt::format("epochs = {} and minibatches = {}: expected >= 1",
                                       config.epochs, config.minibatches));
  }
  return Status::Ok();
}

// The kept samples as rows of the training batch: prompt + completion padded
// to the context, targets only on completion tokens. Token k of the step
// (kept samples' completion tokens, in order) sits at position where[k] of
// the flat [rows * T] batch; row r's tokens are [first[r], first[r + 1]).
struct TrainRows {
  int64_t rows = 0, t_len = 0;
  std::vector<int32_t> tokens, targets;
  std::vector<int64_t> where, first;
};

TrainRows BuildRows(std::span<const std::vector<int32_t>> prompts,
                    std::span<const infer::RolloutSample> kept, int64_t t_len) {
  TrainRows b;
  b.t_len = t_len;
  b.first.push_back(0);
  for (const infer::RolloutSample& s : kept) {
    const std::vector<int32_t>& prompt = prompts[s.request];
    std::vector<int32_t> row(prompt);
    row.insert(row.end(), s.tokens.begin(), s.tokens.end());
    row.pop_back();  // inputs: the last token is only a target
    std::vector<int32_t> row_targets(row.size(), model::kIgnoreIndex);
    for (size_t j = 0; j < s.tokens.size(); ++j) {
      const int64_t pos = static_cast<int64_t>(prompt.size()) - 1 + static_cast<int64_t>(j);
      row_targets[pos] = s.tokens[j];
      b.where.push_back(b.rows * t_len + pos);
    }
    row.resize(t_len, 0);
    row_targets.resize(t_len, model::kIgnoreIndex);
    b.tokens.insert(b.tokens.end(), row.begin(), row.end());
    b.targets.insert(b.targets.end(), row_targets.begin(), row_targets.end());
    ++b.rows;
    b.first.push_back(static_cast<int64_t>(b.where.size()));
  }
  return b;
}

template <typename T>
std::span<const T> Slice(const std::vector<T>& v, int64_t begin, int64_t end) {
  if (v.empty()) return {};
  return std::span<const T>(v).subspan(begin, end - begin);
}

}  // namespace

Result<Rollouts> GenerateRollouts(infer::RolloutEngine& engine, const kernels::KernelCtx& ctx,
                                  std::span<const std::vector<int32_t>> prompts, int64_t step,
                                  const std::atomic<bool>* cancel) {
  ANVIL_TRACE_ZONE("rollouts");
  Rollouts r;
  r.sampling = engine.options().sampling;
  r.group_size = engine.options().samples;
  RETURN_IF_ERROR(CheckSampling(r.sampling));
  ASSIGN_OR_RETURN(r.samples, engine.Generate(ctx, prompts, &r.stats,
                                              static_cast<uint32_t>(step * prompts.size()), cancel));
  return r;
}

Result<PolicyStepResult> PolicyStep(model::Llama& model, optim::AdamW& adamw, double lr,
                                    double grad_clip, int64_t step, const kernels::KernelCtx& ctx,
                                    infer::RolloutEngine& engine,
                                    std::span<const std::vector<int32_t>> prompts, int group_size,
                                    const RewardFn& reward, const PolicyStepConfig& config,
                                    model::Llama* reference, const Critic& critic) {
  if (engine.options().samples != group_size) {
    return InvalidArgument(fmt::format("the engine draws {} samples a prompt, the groups are {}",
                                       engine.options().samples, group_size));
  }
  ASSIGN_OR_RETURN(const Rollouts rollouts, GenerateRollouts(engine, ctx, prompts, step));
  return TrainOnRollouts(model, adamw, lr, grad_clip, ctx, prompts, rollouts, reward, config,
                         reference, critic);
}

Result<PolicyStepResult> TrainOnRollouts(model::Llama& model, optim::AdamW& adamw, double lr,
                                         double grad_clip, const kernels::KernelCtx& ctx,
                                         std::span<const std::vector<int32_t>> prompts,
                                         const Rollouts& rollouts, const RewardFn& reward,
                                         const PolicyStepConfig& config, model::Llama* reference,
                                         const Critic& critic) {
  ANVIL_TRACE_ZONE("policy_update");
  RETURN_IF_ERROR(CheckStep(rollouts, prompts.size(), config, reference, critic));
  const infer::SamplingConfig& sampling = rollouts.sampling;
  const std::vector<infer::RolloutSample>& samples = rollouts.samples;
  const int group_size = rollouts.group_size;
  const PolicyLossConfig& loss_config = config.loss;
  const bool ppo = loss_config.advantage == AdvantageKind::kGae;
  PolicyStepResult r;
  r.staleness = rollouts.staleness;
  r.rollout_seconds = rollouts.stats.seconds;
  r.rollout_tokens = rollouts.stats.new_tokens;
  r.rollout_engine_bytes = rollouts.stats.engine_bytes;
  Stopwatch train_watch;
  for (const infer::RolloutSample& s : samples) {
    for (const double lp : s.logprobs) r.entropy -= lp;
  }
  r.entropy /= static_cast<double>(std::max<int64_t>(1, r.rollout_tokens));
  r.mean_completion_tokens = static_cast<double>(r.rollout_tokens) /
                             static_cast<double>(std::max<size_t>(1, samples.size()));
  std::vector<double> rewards(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    rewards[i] = reward(samples[i].request, samples[i]);
    r.mean_reward += rewards[i] / static_cast<double>(samples.size());
  }
  Advantages adv;
  switch (loss_config.advantage) {
    case AdvantageKind::kGroup:
      adv = GroupAdvantages(rewards, group_size, loss_config);
      break;
    case AdvantageKind::kBatchBaseline:
      adv = BaselineAdvantages(rewards);
      break;
    case AdvantageKind::kGae:  // per token, from the critic below; every sample counts
      adv.value.assign(samples.size(), 0.0);
      adv.kept.assign(samples.size(), true);
      break;
  }
  r.filtered_groups = adv.filtered_groups;

  std::vector<infer::RolloutSample> kept;
  std::vector<double> kept_advantage, kept_reward;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (!adv.kept[i]) continue;
    kept.push_back(samples[i]);
    kept_advantage.push_back(adv.value[i]);
    kept_reward.push_back(rewards[i]);
  }
  const TrainRows rows = BuildRows(prompts, kept, model.config().max_seq_len);
  // PPO: the critic's values of every trained position before the updates,
  // read from the LM head's input of the log-prob recompute's forward (the
  // features a separate forward would give, bit for bit: rows are batch
  // invariant), or of the same forward of a separate critic, in the order of
  // rows.where.
  std::vector<double> values_old(ppo ? rows.where.size() : 0);
  std::vector<int64_t> call_where;
  infer::HeadInputFn values_hook = nullptr;
  if (ppo) {
    values_hook = [&](const float* x, size_t first, int64_t n_rows, int64_t t_len) {
      call_where.clear();
      for (int64_t q = 0; q < n_rows; ++q) {
        const infer::RolloutSample& s = kept[first + q];
        const int64_t start = q * t_len + static_cast<int64_t>(prompts[s.request].size()) - 1;
        for (size_t j = 0; j < s.tokens.size(); ++j) {
          call_where.push_back(start + static_cast<int64_t>(j));
        }
      }
      critic.head->Values(
          x, call_where,
          std::span<double>(values_old).subspan(rows.first[first], call_where.size()));
    };
  }
  // logp_old: the trainer's policy when the samples were drawn (the first
  // update's logp); behaviour: the sampler's (equal, bit for bit, unless the
  // rollouts ran quantized on purpose); ref: the reference's.
  const bool separate = ppo && critic.trunk != nullptr;
  ASSIGN_OR_RETURN(
      const std::vector<std::vector<double>> recomputed,
      infer::RecomputeLogProbs(model, ctx, prompts, kept, sampling,
                               separate ? infer::HeadInputFn(nullptr) : values_hook));
  if (separate) {
    RETURN_IF_ERROR(infer::ForwardHeadInputs(*critic.trunk, ctx, prompts, kept, values_hook));
  }
  std::vector<std::vector<double>> reference_logp;
  if (reference != nullptr) {
    ASSIGN_OR_RETURN(reference_logp,
                     infer::RecomputeLogProbs(*reference, ctx, prompts, kept, sampling));
  }
  std::vector<double> logp_old, behaviour, ref, advantage;
  for (size_t k = 0; k < kept.size(); ++k) {
    const std::vector<double>& now = recomputed[k];
    for (size_t j = 0; j < now.size(); ++j) {
      logp_old.push_back(now[j]);
      behaviour.push_back(kept[k].logprobs[j]);
      if (reference != nullptr) ref.push_back(reference_logp[k][j]);
      advantage.push_back(kept_advantage[k]);  // PPO: 0 until GAE below
      r.max_logprob_diff = std::max(r.max_logprob_diff, std::fabs(now[j] - kept[k].logprobs[j]));
    }
  }
  r.tokens = static_cast<int64_t>(logp_old.size());
  if (rows.rows == 0) {  // every group filtered: nothing to learn this step
    r.train_seconds = train_watch.Seconds();
    return r;
  }
  for (size_t k = 0; k < logp_old.size(); ++k) r.rollout_kl += behaviour[k] - logp_old[k];
  r.rollout_kl /= static_cast<double>(logp_old.size());
  const int64_t t_len = rows.t_len;
  const int64_t capacity =
      model.options().max_batch *
      (model.options().max_seq_len > 0 ? model.options().max_seq_len : model.config().max_seq_len);
  if (rows.rows * t_len > capacity) {
    return InvalidArgument(
        fmt::format("{} rows of {} positions exceed the model's {} (LlamaOptions max_batch)",
                    rows.rows, t_len, capacity));
  }

  // PPO: GAE's advantages and returns from the values, sample by sample.
  std::vector<double> returns;
  if (ppo) {
    returns.resize(rows.where.size());
    for (int64_t k = 0; k < rows.rows; ++k) {
      const int64_t b = rows.first[k], e = rows.first[k + 1];
      Gae(std::span<const double>(values_old).subspan(b, e - b), kept_reward[k], config.ppo,
          std::span<double>(advantage).subspan(b, e - b),
          std::span<double>(returns).subspan(b, e - b));
    }
    if (config.ppo.whiten) Whiten(advantage);
    for (const double v : values_old) r.value_mean += v;
    r.value_mean /= static_cast<double>(values_old.size());
    r.explained_variance = ExplainedVariance(returns, values_old);
  }

  // The updates: `epochs` passes, each over `minibatches` contiguous shares of the rows.
  std::vector<float> token_weights(logp_old.size());
  std::vector<float> weights;
  std::vector<double> values_now, dv;
  std::vector<int64_t> local_where;
  model::LlamaParams& params = model.params();
  r.tis_mean = 0;  // summed over the updates below
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    for (int mb = 0; mb < config.minibatches; ++mb) {
      const int64_t r0 = rows.rows * mb / config.minibatches;
      const int64_t r1 = rows.rows * (mb + 1) / config.minibatches;
      if (r0 == r1) continue;
      const int64_t k0 = rows.first[r0], k1 = rows.first[r1];
      std::vector<double> logp_now;
      if (r.updates > 0) {  // the weights moved: this share's log-probs now
        ASSIGN_OR_RETURN(
            const std::vector<std::vector<double>> now,
            infer::RecomputeLogProbs(
                model, ctx, prompts,
                std::span<const infer::RolloutSample>(kept).subspan(r0, r1 - r0), sampling));
        for (const std::vector<double>& lp : now)
          logp_now.insert(logp_now.end(), lp.begin(), lp.end());
      }
      const std::span<float> tw = std::span<float>(token_weights).subspan(k0, k1 - k0);
      const PolicyTokenStats st = PolicyTokenWeights(
          r.updates > 0 ? std::span<const double>(logp_now) : Slice(logp_old, k0, k1),
          Slice(logp_old, k0, k1), Slice(ref, k0, k1), Slice(behaviour, k0, k1),
          Slice(advantage, k0, k1), loss_config, tw);
      const int64_t base = r0 * t_len, n = (r1 - r0) * t_len;
      weights.assign(n, 0.0f);
      local_where.clear();
      for (int64_t k = k0; k < k1; ++k) {
        weights[rows.where[k] - base] = token_weights[k];
        local_where.push_back(rows.where[k] - base);
      }
      model::StepHooks value_hooks;
      ValueLossStats vs;
      if (ppo) {
        critic.head->ZeroGrads();
        value_hooks.head_input = [&](const float* x, float* dx, int64_t) {
          values_now.resize(local_where.size());
          dv.resize(local_where.size());
          critic.head->Values(x, local_where, values_now);
          vs = ValueLoss(values_now, Slice(values_old, k0, k1), Slice(returns, k0, k1), config.ppo,
                         dv);
          critic.head->Backward(x, local_where, dv, dx);
        };
      }
      const model::Batch batch{.rows = r1 - r0,
                               .seq_len = t_len,
                               .tokens = std::span<const int32_t>(rows.tokens).subspan(base, n),
                               .targets = std::span<const int32_t>(rows.targets).subspan(base, n),
                               .loss_weights = weights};
      model.ZeroGrads(ctx);
      model.ForwardBackward(ctx, batch, /*loss_scale=*/1.0f,
                            separate ? model::StepHooks{} : value_hooks);
      double norm = optim::GlobalNorm(ctx.pool(), params.grads());
      if (ppo && !separate) {
        norm = std::hypot(norm, optim::GlobalNorm(ctx.pool(), critic.head->grads()));
      }
      const float clip_scale = optim::ClipScale(norm, grad_clip);
      adamw.Step(ctx, lr, clip_scale, params.weights(), params.grads(), params.bf16());
      if (separate) {
        // The critic's own step: the value loss's gradient at its features
        // (it has no LM head), clipped on its own norm.
        model::LlamaParams& cp = critic.trunk->params();
        critic.trunk->ZeroGrads(ctx);
        critic.trunk->ForwardBackward(ctx, batch, /*loss_scale=*/1.0f, value_hooks);
        const double critic_norm =
            std::hypot(optim::GlobalNorm(ctx.pool(), cp.grads()),
                       optim::GlobalNorm(ctx.pool(), critic.head->grads()));
        const float critic_clip = optim::ClipScale(critic_norm, grad_clip);
        critic.trunk_adamw->Step(ctx, lr * critic.trunk_lr_ratio, critic_clip, cp.weights(),
                                 cp.grads(), cp.bf16());
        critic.adamw->Step(ctx, lr * critic.lr_ratio, critic_clip, critic.head->params(),
                           critic.head->grads(), {});
      } else if (ppo) {
        critic.adamw->Step(ctx, lr * critic.lr_ratio, clip_scale, critic.head->params(),
                           critic.head->grads(), {});
      }
      ++r.updates;
      r.loss += st.loss;
      r.clip_fraction += st.clip_fraction;
      r.kl += st.kl;
      r.tis_mean += st.tis_mean;
      r.tis_truncated += st.tis_truncated;
      r.grad_norm += norm;
      r.value_loss += vs.loss;
      r.value_clip_fraction += vs.clip_fraction;
    }
  }
  const double inv = 1.0 / static_cast<double>(r.updates);
  for (double* m : {&r.loss, &r.clip_fraction, &r.kl, &r.tis_mean, &r.tis_truncated, &r.grad_norm,
                    &r.value_loss, &r.value_clip_fraction}) {
    *m *= inv;
  }
  r.train_seconds = train_watch.Seconds();
  return r;
}

}  // namespace anvil::rl
