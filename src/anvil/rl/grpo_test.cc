// GRPO: advantages per group (all-equal groups filtered); the token weights
// are minus the derivative of the GRPO loss (central differences, away from
// the clip's kinks), the clip binds where it should; and on a micro model a
// few on-policy steps with a toy reward (emit token 7) raise the reward, the
// rollout's log-probabilities equal the training forward's exactly; so do a
// few REINFORCE steps (reward minus the step's mean) and PPO with a value head on
// the policy's features or on a critic model of its own.
#include "anvil/rl/policy_step.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "anvil/core/thread_pool.h"
#include "anvil/model/int_linear.h"

namespace anvil::rl {
namespace {

TEST(GrpoTest, GroupAdvantages) {
  const std::vector<double> rewards = {1, 0, 0, 0, /**/ 2, 2, 2, 2, /**/ 0, 1, 0, 1};
  const Advantages a = GroupAdvantages(rewards, 4, {});
  EXPECT_EQ(a.filtered_groups, 1);
  EXPECT_FALSE(a.kept[4] || a.kept[7]);
  EXPECT_TRUE(a.kept[0] && a.kept[11]);
  // Group 0: mean 0.25, sample std 0.5.
  EXPECT_NEAR(a.value[0], 0.75 / 0.5, 1e-5);
  EXPECT_NEAR(a.value[1], -0.25 / 0.5, 1e-5);
  const Advantages dr = GroupAdvantages(rewards, 4, {.scale_by_std = false});
  EXPECT_DOUBLE_EQ(dr.value[0], 0.75);
}

TEST(GrpoTest, BaselineAdvantages) {
  const std::vector<double> rewards = {1, 0, 0, 1, 0.5};
  const Advantages a = BaselineAdvantages(rewards);
  EXPECT_DOUBLE_EQ(a.value[0], 0.5);
  EXPECT_DOUBLE_EQ(a.value[1], -0.5);
  EXPECT_FALSE(a.kept[4]);  // exactly at the baseline
  EXPECT_TRUE(a.kept[0] && a.kept[1]);
  EXPECT_EQ(a.filtered_groups, 0);
}

// The loss PolicyTokenWeights reports, as a function of logp.
double Loss(const std::vector<double>& logp, const std::vector<double>& old,
            const std::vector<double>& ref, const std::vector<double>& behaviour,
            const std::vector<double>& adv, const PolicyLossConfig& c) {
  std::vector<float> w(logp.size());
  return PolicyTokenWeights(logp, old, ref, behaviour, adv, c, w).loss;
}

TEST(GrpoTest, TokenWeightsAreTheLossGradient) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(-0.6, 0.6);
  const int n = 200;
  std::vector<double> logp(n), old(n), ref(n), behaviour(n), adv(n);
  for (int t = 0; t < n; ++t) {
    old[t] = -1.0 - std::fabs(u(rng));
    logp[t] = old[t] + u(rng);  // ratios from 0.55 to 1.8: clips bind both ways
    ref[t] = old[t] + 0.3 * u(rng);
    behaviour[t] = old[t] - 1.5 * u(rng);  // importance weights up to e^0.9: some truncated
    adv[t] = t % 3 == 0 ? -1.3 : 0.7 + u(rng);
  }
  const PolicyLossConfig c{.kl_coef = 0.05};
  std::vector<float> w(n);
  const PolicyTokenStats st = PolicyTokenWeights(logp, old, ref, behaviour, adv, c, w);
  EXPECT_GT(st.clip_fraction, 0.05);
  EXPECT_LT(st.clip_fraction, 0.9);
  EXPECT_GT(st.kl, 0);
  EXPECT_GT(st.tis_truncated, 0.02);
  EXPECT_NE(st.tis_mean, 1.0);
  const double h = 1e-6;
  int checked = 0;
  for (int t = 0; t < n; ++t) {
    const double rho = std::exp(logp[t] - old[t]);
    const double lo = 1 - c.clip_low, hi = 1 + c.clip_high;
    if (std::fabs(rho - lo) < 1e-3 || std::fabs(rho - hi) < 1e-3) continue;  // a kink
    std::vector<double> p = logp, m = logp;
    p[t] += h;
    m[t] -= h;
    const double grad =
        (Loss(p, old, ref, behaviour, adv, c) - Loss(m, old, ref, behaviour, adv, c)) / (2 * h);
    EXPECT_NEAR(w[t], -grad, 1e-6 + 1e-4 * std::fabs(grad)) << "token " << t << " rho " << rho;
    ++checked;
  }
  EXPECT_GT(checked, 150);
}

// Under importance weights the KL penalty is weighted like the policy term:
// per token, its share of the weight is c_t times the on-policy share, and
// the reported KL is the c-weighted mean.
TEST(GrpoTest, KlPenaltyIsImportanceWeighted) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> u(-0.6, 0.6);
  const int n = 64;
  std::vector<double> logp(n), old(n), ref(n), behaviour(n), adv(n);
  for (int t = 0; t < n; ++t) {
    old[t] = -1.0 - std::fabs(u(rng));
    logp[t] = old[t] + 0.2 * u(rng);
    ref[t] = old[t] + 0.5 * u(rng);
    behaviour[t] = old[t] - 1.5 * u(rng);
    adv[t] = 0.5 + u(rng);
  }
  const PolicyLossConfig with_kl{.kl_coef = 0.1}, without_kl{.kl_coef = 0};
  auto weights = [&](const std::vector<double>& b, const PolicyLossConfig& c,
                     PolicyTokenStats* st) {
    std::vector<float> w(n);
    *st = PolicyTokenWeights(logp, old, ref, b, adv, c, w);
    return w;
  };
  PolicyTokenStats st_is, st, unused;
  const std::vector<float> kl_is = weights(behaviour, with_kl, &st_is);
  const std::vector<float> pg_is = weights(behaviour, without_kl, &unused);
  const std::vector<float> kl_on = weights({}, with_kl, &st);
  const std::vector<float> pg_on = weights({}, without_kl, &unused);
  double weighted_kl = 0;
  for (int t = 0; t < n; ++t) {
    const double c = std::min(std::exp(old[t] - behaviour[t]), with_kl.tis_cap);
    const double share_is = double{kl_is[t]} - pg_is[t], share_on = double{kl_on[t]} - pg_on[t];
    EXPECT_NEAR(share_is, c * share_on, 1e-7 + 1e-5 * std::fabs(share_is)) << "token " << t;
    const double d = ref[t] - logp[t];
    weighted_kl += c * (std::exp(d) - d - 1) / n;
  }
  EXPECT_NEAR(st_is.kl, weighted_kl, 1e-12);
  EXPECT_GT(std::fabs(st_is.kl - st.kl), 1e-4);
}

TEST(GrpoTest, OnPolicyStepsRaiseAToyRewardWithExactLogProbs) {
  ThreadPool pool(2);
  const kernels::KernelCtx ctx(pool);
  model::ModelConfig cfg;
  cfg.dim = 64;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.n_kv_heads = 2;
  cfg.ffn_dim = 96;
  cfg.vocab_size = 32;
  cfg.max_seq_len = 16;
  constexpr int kPrompts = 8, kGroup = 4;
  model::Llama model(cfg, {.max_batch = kPrompts * kGroup}, ctx);
  infer::RolloutEngine engine(model.forward_weights(),
                              {.max_batch = 16,
                               .max_new = 6,
                               .samples = kGroup,
                               .eos = -1,
                               .sampling = {.temperature = 1, .top_k = 0, .top_p = 1}});
  std::mt19937 rng(1);
  std::vector<std::vector<int32_t>> prompts(kPrompts);
  for (auto& p : prompts) {
    p.resize(4);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % cfg.vocab_size);
  }
  const RewardFn sevens = [](int64_t, const infer::RolloutSample& s) {
    return static_cast<double>(std::count(s.tokens.begin(), s.tokens.end(), 7)) /
           static_cast<double>(s.tokens.size());
  };
  optim::OptimConfig oc;
  oc.weight_decay = 0;
  // GRPO; REINFORCE with the step's mean reward as its baseline; PPO with a
  // value head; GRPO again with two passes of two updates a step, where the
  // later updates move the policy off the sampler's and the clip binds.
  struct Case {
    const char* name;
    PolicyStepConfig config;
  };
  const Case cases[] = {
      {"grpo", {.loss = {.advantage = AdvantageKind::kGroup}, .ppo = {}}},
      {"reinforce", {.loss = {.advantage = AdvantageKind::kBatchBaseline}, .ppo = {}}},
      {"ppo", {.loss = {.advantage = AdvantageKind::kGae}, .ppo = {.vf_coef = 0.5}}},
      {"ppo, separate critic",
       {.loss = {.advantage = AdvantageKind::kGae}, .ppo = {.vf_coef = 0.5}}},
      {"grpo 2x2",
       {.loss = {.advantage = AdvantageKind::kGroup}, .ppo = {}, .epochs = 2, .minibatches = 2}},
  };
  for (const Case& c : cases) {
    model.InitWeights(ctx, 4);
    optim::AdamW adamw(oc, optim::LlamaParamGroups(model.params()), model.params().size());
    const bool ppo = c.config.loss.advantage == AdvantageKind::kGae;
    ValueHead head(cfg.dim);
    optim::AdamW head_adamw(oc, {{.offset = 0, .numel = cfg.dim + 1, .decay = false}},
                            cfg.dim + 1);
    // A separate critic: a model of its own from the policy's starting weights.
    const bool separate = std::string(c.name).find("separate") != std::string::npos;
    model::Llama critic_model(cfg, {.max_batch = kPrompts * kGroup, .lm_head = false}, ctx);
    critic_model.InitWeights(ctx, 4);
    optim::AdamW critic_adamw(oc, optim::LlamaParamGroups(critic_model.params(), false),
                              critic_model.params().size());
    Critic critic = ppo ? Critic{&head, &head_adamw} : Critic{};
    if (separate) {  // a whole model learns features: slower than the head
      // A critic model that would run its LM head is refused.
      model::Llama with_head(cfg, {.max_batch = kPrompts * kGroup}, ctx);
      critic.trunk = &with_head;
      critic.trunk_adamw = &critic_adamw;
      const auto refused = PolicyStep(model, adamw, 1e-2, 1.0, 0, ctx, engine, prompts, kGroup,
                                      sevens, c.config, nullptr, critic);
      ASSERT_FALSE(refused.ok());
      EXPECT_NE(refused.status().message().find("LM head"), std::string::npos)
          << refused.status().ToString();
      critic.trunk = &critic_model;
      critic.trunk_lr_ratio = 0.1;
    }
    std::vector<double> reward, value_loss;
    double clip = 0;
    for (int step = 0; step < 25; ++step) {
      auto r = PolicyStep(model, adamw, 1e-2, 1.0, step, ctx, engine, prompts, kGroup, sevens,
                          c.config, nullptr, critic);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->max_logprob_diff, 0.0) << "step " << step;
      EXPECT_EQ(r->rollout_kl, 0.0) << "step " << step;
      EXPECT_EQ(r->updates, r->tokens > 0 ? c.config.epochs * c.config.minibatches : 0);
      if (c.config.epochs * c.config.minibatches == 1) {
        EXPECT_EQ(r->clip_fraction, 0.0);  // one update on-policy: every ratio is exactly 1
      }
      clip = std::max(clip, r->clip_fraction);
      reward.push_back(r->mean_reward);
      value_loss.push_back(r->value_loss);
    }
    const double first = (reward[0] + reward[1] + reward[2]) / 3;
    const double last = (reward[22] + reward[23] + reward[24]) / 3;
    std::printf("toy reward (%s): first steps %.3f, last steps %.3f\n", c.name, first, last);
    EXPECT_GT(last, first + 0.3) << c.name;
    if (c.config.epochs > 1) {
      EXPECT_GT(clip, 0.0) << "the later updates are off-policy";
    }
    if (ppo) {  // the critic learns the returns
      std::printf("  value loss: first step %.4f, last %.4f\n", value_loss[0], value_loss[24]);
      EXPECT_LT(value_loss[24], 0.5 * value_loss[0]);
    }
  }
  // Rollouts through W8A8 layers on purpose: the log-probabilities differ
  // from the trainer's, truncated importance weights correct for it, and the
  // reward still rises.
  {
    model.InitWeights(ctx, 4);
    optim::AdamW adamw(oc, optim::LlamaParamGroups(model.params()), model.params().size());
    model::IntLinear w8a8(model.forward_weights(), model::WeightQuant::kW8A8, 16, ctx);
    infer::RolloutEngine quantized(model.forward_weights(),
                                   {.max_batch = 16,
                                    .max_new = 6,
                                    .samples = kGroup,
                                    .eos = -1,
                                    .sampling = {.temperature = 1, .top_k = 0, .top_p = 1},
                                    .linear = &w8a8});
    std::vector<double> reward;
    double max_diff = 0, tis_off = 0;
    for (int step = 0; step < 25; ++step) {
      w8a8.Requantize(model.forward_weights(), ctx);
      auto r = PolicyStep(model, adamw, 1e-2, 1.0, step, ctx, quantized, prompts, kGroup, sevens,
                          {});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      max_diff = std::max(max_diff, r->max_logprob_diff);
      tis_off = std::max(tis_off, std::fabs(r->tis_mean - 1));
      reward.push_back(r->mean_reward);
    }
    EXPECT_GT(max_diff, 1e-4);
    EXPECT_GT(tis_off, 1e-6);
    std::printf("toy reward (w8a8 rollouts): first steps %.3f, last steps %.3f; max |dlogp| %.2e\n",
                (reward[0] + reward[1] + reward[2]) / 3, (reward[22] + reward[23] + reward[24]) / 3,
                max_diff);
    EXPECT_GT((reward[22] + reward[23] + reward[24]) / 3, (reward[0] + reward[1] + reward[2]) / 3 + 0.3);
  }
  optim::AdamW adamw(oc, optim::LlamaParamGroups(model.params()), model.params().size());
  // Sampling from anything but the policy is refused.
  infer::RolloutEngine tempered(model.forward_weights(),
                                {.samples = kGroup, .sampling = {.temperature = 0.7}});
  EXPECT_FALSE(
      PolicyStep(model, adamw, 1e-2, 1.0, 0, ctx, tempered, prompts, kGroup, sevens, {}).ok());
}

}  // namespace
}  // namespace anvil::rl
