// One on-policy GRPO step (grpo_step.h).
#include "anvil/rl/grpo_step.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "anvil/core/clock.h"
#include "anvil/profile/trace.h"

namespace anvil::rl {

Result<GrpoStepResult> GrpoStep(model::Llama& model, optim::AdamW& adamw, double lr,
                                double grad_clip, int64_t step, const kernels::KernelCtx& ctx,
                                infer::RolloutEngine& engine,
                                std::span<const std::vector<int32_t>> prompts, int group_size,
                                const RewardFn& reward, const GrpoConfig& config,
                                model::Llama* reference) {
  ANVIL_TRACE_ZONE("grpo_step");
  const infer::SamplingConfig& sampling = engine.options().sampling;
  if (sampling.greedy || sampling.temperature != 1.0 || sampling.top_k != 0 ||
      sampling.top_p != 1.0) {
    return InvalidArgument(
        "GRPO samples from the policy itself: temperature 1, top_k 0, top_p 1, not greedy");
  }
  if (config.kl_coef != 0 && reference == nullptr) {
    return InvalidArgument("GRPO: a KL penalty (kl_coef != 0) needs a reference model");
  }
  if (config.kl_coef < 0) return InvalidArgument("GRPO: kl_coef must be >= 0");
  if (engine.options().samples != group_size) {
    return InvalidArgument(fmt::format("the engine draws {} samples a prompt, the groups are {}",
                                       engine.options().samples, group_size));
  }
  GrpoStepResult r;
  infer::RolloutStats rollout;
  ASSIGN_OR_RETURN(const std::vector<infer::RolloutSample> samples,
                   engine.Generate(ctx, prompts, &rollout,
                                   static_cast<uint32_t>(step * prompts.size())));
  r.rollout_seconds = rollout.seconds;
  r.rollout_tokens = rollout.new_tokens;
  Stopwatch train_watch;
  for (const infer::RolloutSample& s : samples) {
    for (const double lp : s.logprobs) r.entropy -= lp;
  }
  r.entropy /= static_cast<double>(std::max<int64_t>(1, r.rollout_tokens));
  r.mean_completion_tokens =
      static_cast<double>(r.rollout_tokens) / static_cast<double>(std::max<size_t>(1, samples.size()));
  std::vector<double> rewards(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    rewards[i] = reward(samples[i].request, samples[i]);
    r.mean_reward += rewards[i] / static_cast<double>(samples.size());
  }
  const Advantages adv = config.advantage == AdvantageKind::kGroup
                            ? GroupAdvantages(rewards, group_size, config)
                            : BaselineAdvantages(rewards);
  r.filtered_groups = adv.filtered_groups;

  // Rows of the training batch: the kept samples, prompt + completion padded
  // to the context; targets only on completion tokens, weighted.
  const int64_t t_len = model.config().max_seq_len;
  std::vector<int32_t> tokens, targets;
  // logp: the trainer's policy now; logp_old: the same before this step's
  // update (one update per batch: equal); behaviour: the sampler's (equal
  // too, bit for bit, unless the rollouts ran quantized on purpose).
  std::vector<double> logp, logp_old, behaviour, ref, advantage;
  std::vector<int64_t> where;  // batch row * T + position of each completion token
  std::vector<infer::RolloutSample> kept;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (adv.kept[i]) kept.push_back(samples[i]);
  }
  ASSIGN_OR_RETURN(const std::vector<std::vector<double>> recomputed,
                   infer::RecomputeLogProbs(model, ctx, prompts, kept, sampling));
  std::vector<std::vector<double>> reference_logp;
  if (reference != nullptr) {
    ASSIGN_OR_RETURN(reference_logp,
                     infer::RecomputeLogProbs(*reference, ctx, prompts, kept, sampling));
  }
  int64_t rows = 0;
  for (size_t i = 0, k = 0; i < samples.size(); ++i) {
    if (!adv.kept[i]) continue;
    const infer::RolloutSample& s = samples[i];
    const std::vector<int32_t>& prompt = prompts[s.request];
    const std::vector<double>& now = recomputed[k];
    const std::vector<double>* ref_now = reference != nullptr ? &reference_logp[k] : nullptr;
    ++k;
    std::vector<int32_t> row(prompt);
    row.insert(row.end(), s.tokens.begin(), s.tokens.end());
    row.pop_back();  // inputs: the last token is only a target
    std::vector<int32_t> row_targets(row.size(), model::kIgnoreIndex);
    for (size_t j = 0; j < s.tokens.size(); ++j) {
      const int64_t pos = static_cast<int64_t>(prompt.size()) - 1 + static_cast<int64_t>(j);
      row_targets[pos] = s.tokens[j];
      where.push_back(rows * t_len + pos);
      logp.push_back(now[j]);
      logp_old.push_back(now[j]);
      behaviour.push_back(s.logprobs[j]);
      if (ref_now != nullptr) ref.push_back((*ref_now)[j]);
      advantage.push_back(adv.value[i]);
      r.max_logprob_diff = std::max(r.max_logprob_diff, std::fabs(now[j] - s.logprobs[j]));
    }
    row.resize(t_len, 0);
    row_targets.resize(t_len, model::kIgnoreIndex);
    tokens.insert(tokens.end(), row.begin(), row.end());
    targets.insert(targets.end(), row_targets.begin(), row_targets.end());
    ++rows;
  }
  r.tokens = static_cast<int64_t>(logp.size());
  if (rows == 0) {  // every group filtered: nothing to learn this step
    r.train_seconds = train_watch.Seconds();
    return r;
  }
  for (size_t k = 0; k < logp.size(); ++k) r.rollout_kl += behaviour[k] - logp[k];
  r.rollout_kl /= static_cast<double>(logp.size());
  const int64_t capacity = model.options().max_batch *
                           (model.options().max_seq_len > 0 ? model.options().max_seq_len
                                                            : model.config().max_seq_len);
  if (rows * t_len > capacity) {
    return InvalidArgument(fmt::format(
        "GRPO: {} rows of {} positions exceed the model's {} (LlamaOptions max_batch)", rows,
        t_len, capacity));
  }
  std::vector<float> token_weights(logp.size());
  const GrpoTokenStats st =
      GrpoTokenWeights(logp, logp_old, ref, behaviour, advantage, config, token_weights);
  r.loss = st.loss;
  r.clip_fraction = st.clip_fraction;
  r.kl = st.kl;
  r.tis_mean = st.tis_mean;
  r.tis_truncated = st.tis_truncated;
  std::vector<float> weights(tokens.size(), 0.0f);
  for (size_t k = 0; k < where.size(); ++k) weights[where[k]] = token_weights[k];
  const model::Batch batch{.rows = rows, .seq_len = t_len, .tokens = tokens, .targets = targets,
                           .loss_weights = weights};
  model.ZeroGrads(ctx);
  model.ForwardBackward(ctx, batch, /*loss_scale=*/1.0f);
  model::LlamaParams& params = model.params();
  r.grad_norm = optim::GlobalNorm(ctx.pool(), params.grads());
  adamw.Step(ctx, lr, optim::ClipScale(r.grad_norm, grad_clip), params.weights(), params.grads(),
             params.bf16());
  r.train_seconds = train_watch.Seconds();
  return r;
}

}  // namespace anvil::rl
