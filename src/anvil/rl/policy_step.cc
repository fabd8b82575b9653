// One on-policy RL step (policy_step.h).
#include "anvil/rl/policy_step.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "anvil/comm/world.h"
#include "anvil/core/check.h"
#include "anvil/core/clock.h"
#include "anvil/profile/trace.h"
#include "anvil/rl/trainer_ranks.h"

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

// Per-row values, row after row, into `out` (at least their count).
void Flatten(const std::vector<std::vector<double>>& rows, std::span<double> out) {
  size_t at = 0;
  for (const std::vector<double>& row : rows) {
    std::copy(row.begin(), row.end(), out.begin() + static_cast<int64_t>(at));
    at += row.size();
  }
}

template <typename T>
std::span<const T> Slice(const std::vector<T>& v, int64_t begin, int64_t end) {
  if (v.empty()) return {};
  return std::span<const T>(v).subspan(begin, end - begin);
}

}  // namespace

Result<Rollouts> GenerateRollouts(infer::RolloutEngine& engine, const kernels::KernelCtx& ctx,
                                  std::span<const std::vector<int32_t>> prompts, int64_t step,
                                  const std::function<bool()>& cancel, int64_t step_prompts,
                                  int64_t first_prompt) {
  ANVIL_TRACE_ZONE("rollouts");
  Rollouts r;
  r.sampling = engine.options().sampling;
  r.group_size = engine.options().samples;
  RETURN_IF_ERROR(CheckSampling(r.sampling));
  if (step_prompts < 0) step_prompts = static_cast<int64_t>(prompts.size());
  ASSIGN_OR_RETURN(
      r.samples,
      engine.Generate(ctx, prompts, &r.stats,
                      static_cast<uint32_t>(step * step_prompts + first_prompt), cancel));
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
                                         const Critic& critic, TrainerRanks* trainer_ranks) {
  ANVIL_TRACE_ZONE("policy_update");
  RETURN_IF_ERROR(CheckStep(rollouts, prompts.size(), config, reference, critic));
  std::unique_ptr<comm::Group> alone;
  std::unique_ptr<TrainerRanks> own_ranks;
  if (trainer_ranks == nullptr) {
    alone = comm::MakeLocalGroup("trainer");
    const int zero = model.params().has_grads() ? 0 : 2;  // (a model built for ZeRO-2)
    own_ranks = std::make_unique<TrainerRanks>(*alone, 1, zero, model, critic.trunk, ctx.pool());
    trainer_ranks = own_ranks.get();
  }
  TrainerRanks& ranks = *trainer_ranks;
  CHECK((critic.trunk != nullptr) == (ranks.critic_dp() != nullptr))
      << "TrainerRanks reduce a separate critic's grads exactly when there is one";
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
  // Each rank scores its share of the samples (a reward command runs once
  // a sample, not once a rank); every rank then holds every reward.
  std::vector<double> rewards(samples.size());
  {
    const auto [first, last] = ranks.Share(static_cast<int64_t>(samples.size()));
    for (int64_t i = first; i < last; ++i) rewards[i] = reward(samples[i].request, samples[i]);
    std::vector<int64_t> one_each(samples.size() + 1);
    for (size_t i = 0; i < one_each.size(); ++i) one_each[i] = static_cast<int64_t>(i);
    ranks.GatherShares(one_each, rewards);
  }
  for (const double x : rewards) r.mean_reward += x / static_cast<double>(samples.size());
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
  // The recomputes below run on this rank's share of the rows, whose
  // results every rank then gathers (rows are batch invariant: the bits of
  // one call over all of them).
  const auto [share0, share1] = ranks.Share(rows.rows);
  const std::span<const infer::RolloutSample> share =
      std::span<const infer::RolloutSample>(kept).subspan(share0, share1 - share0);
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
      const int64_t row0 = share0 + static_cast<int64_t>(first);
      for (int64_t q = 0; q < n_rows; ++q) {
        const infer::RolloutSample& s = kept[row0 + q];
        const int64_t start = q * t_len + static_cast<int64_t>(prompts[s.request].size()) - 1;
        for (size_t j = 0; j < s.tokens.size(); ++j) {
          call_where.push_back(start + static_cast<int64_t>(j));
        }
      }
      critic.head->Values(
          x, call_where,
          std::span<double>(values_old).subspan(rows.first[row0], call_where.size()));
    };
  }
  // logp_old: the trainer's policy when the samples were drawn (the first
  // update's logp); behaviour: the sampler's (equal, bit for bit, unless the
  // rollouts ran quantized on purpose); ref: the reference's.
  const bool separate = ppo && critic.trunk != nullptr;
  std::vector<double> logp_old(rows.where.size()), ref(reference != nullptr ? logp_old.size() : 0);
  if (!share.empty()) {
    ASSIGN_OR_RETURN(
        const std::vector<std::vector<double>> recomputed,
        infer::RecomputeLogProbs(model, ctx, prompts, share, sampling,
                                 separate ? infer::HeadInputFn(nullptr) : values_hook));
    Flatten(recomputed, std::span<double>(logp_old).subspan(rows.first[share0]));
    if (separate) {
      RETURN_IF_ERROR(infer::ForwardHeadInputs(*critic.trunk, ctx, prompts, share, values_hook));
    }
    if (reference != nullptr) {
      ASSIGN_OR_RETURN(const std::vector<std::vector<double>> reference_logp,
                       infer::RecomputeLogProbs(*reference, ctx, prompts, share, sampling));
      Flatten(reference_logp, std::span<double>(ref).subspan(rows.first[share0]));
    }
  }
  for (std::vector<double>* v : {&logp_old, &values_old, &ref}) {
    if (!v->empty()) ranks.GatherShares(rows.first, *v);
  }
  std::vector<double> behaviour, advantage;
  for (size_t k = 0; k < kept.size(); ++k) {
    const std::vector<double>& sampled = kept[k].logprobs;
    for (size_t j = 0; j < sampled.size(); ++j) {
      const double now = logp_old[behaviour.size()];
      behaviour.push_back(sampled[j]);
      advantage.push_back(kept_advantage[k]);  // PPO: 0 until GAE below
      r.max_logprob_diff = std::max(r.max_logprob_diff, std::fabs(now - sampled[j]));
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
  // Every slot's rows must fit the model (every rank checks them all: they
  // stop together).
  int64_t most_rows = 0;
  for (int mb = 0; mb < config.minibatches; ++mb) {
    const int64_t r0 = rows.rows * mb / config.minibatches;
    const int64_t r1 = rows.rows * (mb + 1) / config.minibatches;
    for (int slot = 0; slot < ranks.slots(); ++slot) {
      const auto [a, b] = ranks.SlotRows(r0, r1, slot);
      most_rows = std::max(most_rows, b - a);
    }
  }
  if (most_rows * t_len > capacity) {
    return InvalidArgument(fmt::format(
        "{} rows of {} positions in a micro-batch exceed the model's {} (LlamaOptions max_batch)",
        most_rows, t_len, capacity));
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

  // The updates: `epochs` passes, each over `minibatches` contiguous shares
  // of the rows, each share's gradient folded over its slots (trainer_ranks.h).
  std::vector<float> token_weights(logp_old.size());
  std::vector<float> weights;
  std::vector<double> values_now, dv;
  std::vector<int64_t> local_where;
  model::LlamaParams& params = model.params();
  // Backward of this rank's slots of the update's rows [r0, r1) through `m`,
  // reduced by `dp`; with `values`, the value loss at m's features too, the
  // value head's gradient left in its grads. Returns the reduced gradient.
  auto backward_slots = [&](model::Llama& m, parallel::DataParallel& dp, bool values, int64_t r0,
                            int64_t r1, ValueLossStats& value_stats) {
    const int64_t k0 = rows.first[r0], k1 = rows.first[r1];
    // A slot's value-head gradient, then its value loss and clipped share.
    const int64_t width = values ? static_cast<int64_t>(critic.head->grads().size()) + 2 : 0;
    std::vector<double> slot_values(static_cast<size_t>(ranks.grad_accum() * width));
    for (int i = 0; i < ranks.grad_accum(); ++i) {
      const auto [a, b] = ranks.SlotRows(r0, r1, i * ranks.size() + ranks.rank());
      TrainerRanks::BeginSlot(dp, i, m, ctx);
      if (values) critic.head->ZeroGrads();
      ValueLossStats vs;
      if (a == b) {
        TrainerRanks::EmptySlot(dp, m);
      } else {
        const int64_t ka = rows.first[a], kb = rows.first[b];
        const int64_t base = a * t_len, n = (b - a) * t_len;
        weights.assign(n, 0.0f);
        local_where.clear();
        for (int64_t k = ka; k < kb; ++k) {
          weights[rows.where[k] - base] = token_weights[k];
          local_where.push_back(rows.where[k] - base);
        }
        model::StepHooks hooks;
        TrainerRanks::AddReduction(dp, m, hooks);
        if (values) {
          hooks.head_input = [&](const float* x, float* dx, int64_t) {
            values_now.resize(local_where.size());
            dv.resize(local_where.size());
            critic.head->Values(x, local_where, values_now);
            vs = ValueLoss(values_now, Slice(values_old, ka, kb), Slice(returns, ka, kb),
                           config.ppo, dv, /*total=*/k1 - k0);
            critic.head->Backward(x, local_where, dv, dx);
          };
        }
        const model::Batch batch{.rows = b - a,
                                 .seq_len = t_len,
                                 .tokens = std::span<const int32_t>(rows.tokens).subspan(base, n),
                                 .targets = std::span<const int32_t>(rows.targets).subspan(base, n),
                                 .loss_weights = weights};
        m.ForwardBackward(ctx, batch, /*loss_scale=*/1.0f, hooks);
      }
      if (values) {
        double* out = slot_values.data() + i * width;
        const std::span<const float> g = critic.head->grads();
        std::copy(g.begin(), g.end(), out);
        out[width - 2] = vs.loss;
        out[width - 1] = vs.clip_fraction;
      }
    }
    const std::span<const float> grads = dp.FinishReduction();
    if (values) {  // the slots' value-head gradients and losses, folded in slot order
      const std::vector<double> all = ranks.AllSlots(slot_values, width);
      const std::span<float> g = critic.head->grads();
      value_stats = {};
      for (int slot = 0; slot < ranks.slots(); ++slot) {
        const double* in = all.data() + slot * width;
        for (size_t j = 0; j < g.size(); ++j) {
          g[j] = slot == 0 ? static_cast<float>(in[j]) : g[j] + static_cast<float>(in[j]);
        }
        value_stats.loss += in[width - 2];
        value_stats.clip_fraction += in[width - 1];
      }
    }
    return grads;
  };
  r.tis_mean = 0;  // summed over the updates below
  for (int epoch = 0; epoch < config.epochs; ++epoch) {
    for (int mb = 0; mb < config.minibatches; ++mb) {
      const int64_t r0 = rows.rows * mb / config.minibatches;
      const int64_t r1 = rows.rows * (mb + 1) / config.minibatches;
      if (r0 == r1) continue;
      const int64_t k0 = rows.first[r0], k1 = rows.first[r1];
      std::vector<double> logp_now;
      if (r.updates > 0) {  // the weights moved: this share's log-probs now
        logp_now.resize(k1 - k0);
        const auto [a, b] = ranks.Share(r1 - r0);
        if (b > a) {
          ASSIGN_OR_RETURN(
              const std::vector<std::vector<double>> now,
              infer::RecomputeLogProbs(
                  model, ctx, prompts,
                  std::span<const infer::RolloutSample>(kept).subspan(r0 + a, b - a), sampling));
          Flatten(now, std::span<double>(logp_now).subspan(rows.first[r0 + a] - k0));
        }
        ranks.GatherShares(std::span<const int64_t>(rows.first).subspan(r0, r1 - r0 + 1), logp_now);
      }
      const std::span<float> tw = std::span<float>(token_weights).subspan(k0, k1 - k0);
      const PolicyTokenStats st = PolicyTokenWeights(
          r.updates > 0 ? std::span<const double>(logp_now) : Slice(logp_old, k0, k1),
          Slice(logp_old, k0, k1), Slice(ref, k0, k1), Slice(behaviour, k0, k1),
          Slice(advantage, k0, k1), loss_config, tw);
      ValueLossStats vs;
      // fp8-delayed: the update's forwards run on fixed scales (the first
      // update's are the colocated rollout's), and their amaxes set the next
      // update's.
      TrainerRanks::BeginDelayedStep(model);
      const std::span<const float> grads =
          backward_slots(model, ranks.policy_dp(), ppo && !separate, r0, r1, vs);
      ranks.EndDelayedStep(model);
      double norm = ranks.policy_dp().GradNorm(grads);
      if (ppo && !separate) {
        norm = std::hypot(norm, optim::GlobalNorm(ctx.pool(), critic.head->grads()));
      }
      const float clip_scale = optim::ClipScale(norm, grad_clip);
      adamw.Step(ctx, lr, clip_scale, params.weights(), grads, params.bf16());
      ranks.GatherWeights(ranks.policy_dp(), model, ctx);  // ZeRO-1/2: the other ranks' shards
      if (separate) {
        // The critic's own step: the value loss's gradient at its features
        // (it has no LM head), clipped on its own norm.
        model::LlamaParams& cp = critic.trunk->params();
        TrainerRanks::BeginDelayedStep(*critic.trunk);  // fp8-delayed: its own histories
        const std::span<const float> critic_grads =
            backward_slots(*critic.trunk, *ranks.critic_dp(), /*values=*/true, r0, r1, vs);
        ranks.EndDelayedStep(*critic.trunk);
        const double critic_norm = std::hypot(ranks.critic_dp()->GradNorm(critic_grads),
                                              optim::GlobalNorm(ctx.pool(), critic.head->grads()));
        const float critic_clip = optim::ClipScale(critic_norm, grad_clip);
        critic.trunk_adamw->Step(ctx, lr * critic.trunk_lr_ratio, critic_clip, cp.weights(),
                                 critic_grads, cp.bf16());
        ranks.GatherWeights(*ranks.critic_dp(), *critic.trunk, ctx);
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
