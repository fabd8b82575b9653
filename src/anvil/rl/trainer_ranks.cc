// The trainer ranks of an RL run (trainer_ranks.h).
#include "anvil/rl/trainer_ranks.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "anvil/core/check.h"
#include "anvil/profile/trace.h"
#include "anvil/rl/rollout_wire.h"
#include "anvil/rl/shared_outcome.h"

namespace anvil::rl {
namespace {

std::unique_ptr<parallel::DataParallel> MakeDataParallel(comm::Group& group, int grad_accum,
                                                         int zero, model::Llama& model,
                                                         ThreadPool& pool) {
  model::LlamaParams& p = model.params();
  std::vector<int64_t> tensor_begins;
  for (const model::ParamInfo& info : p.params()) tensor_begins.push_back(info.offset);
  // ZeRO-0 and 1 reduce by buckets, ZeRO-2 by the model's units.
  std::vector<int64_t> units = {0, p.size()};
  if (zero >= 2) {
    units.clear();
    for (int u = 0; u <= model.num_units(); ++u) units.push_back(model.unit_begin(u));
  }
  return std::make_unique<parallel::DataParallel>(
      group, pool, parallel::DataParallelOptions{.zero = zero, .grad_accum = grad_accum}, p.size(),
      p.grads(), tensor_begins, units);
}

// Every rank's `mine`, in rank order, into `all` (sized to the sum).
template <typename T>
void GatherVectors(comm::Group& group, std::span<const T> mine, std::vector<T>& all) {
  std::vector<int64_t> counts(group.size());
  const int64_t own = static_cast<int64_t>(mine.size());
  group.AllGather(std::span<const int64_t>(&own, 1), std::span<int64_t>(counts),
                  std::vector<int64_t>(group.size(), 1));
  int64_t total = 0;
  for (const int64_t c : counts) total += c;
  all.resize(static_cast<size_t>(total));
  group.AllGather(mine, std::span<T>(all), counts);
}

}  // namespace

TrainerRanks::TrainerRanks(comm::Group& group, int grad_accum, int zero, model::Llama& policy,
                           model::Llama* critic, ThreadPool& pool)
    : group_(group), grad_accum_(grad_accum) {
  CHECK_GE(grad_accum, 1);
  CHECK(zero >= 0 && zero <= 2) << "post-training ZeRO stage " << zero;
  CHECK_EQ(policy.params().has_grads(), zero < 2) << "the policy's whole grads under ZeRO-" << zero;
  policy_dp_ = MakeDataParallel(group, grad_accum, zero, policy, pool);
  // A trunk without its LM head holds its whole buffers (LlamaOptions::lm_head):
  // ZeRO-1 at most, and as ZeRO-0 on one rank (nothing to shard).
  if (critic != nullptr) {
    const int critic_zero = group.size() > 1 ? std::min(zero, 1) : 0;
    critic_dp_ = MakeDataParallel(group, grad_accum, critic_zero, *critic, pool);
  }
}

void TrainerRanks::BeginSlot(parallel::DataParallel& dp, int index, model::Llama& model,
                             const kernels::KernelCtx& ctx) {
  dp.BeginMicroBatch(index);
  if (model.params().has_grads()) model.ZeroGrads(ctx);  // (ZeRO-2: each unit's slot is zeroed)
}

void TrainerRanks::AddReduction(parallel::DataParallel& dp, model::Llama& model,
                                model::StepHooks& hooks) {
  hooks.grads_ready = [&dp](int64_t from) { dp.OnGradsReady(from); };
  if (dp.options().zero >= 2) {
    hooks.before_backward = [&dp, &model](int unit) {
      model.BindUnitGrads(unit, dp.BeginUnitBackward(unit));
    };
  }
}

void TrainerRanks::EmptySlot(parallel::DataParallel& dp, const model::Llama& model) {
  if (dp.options().zero < 2) return dp.OnGradsReady(0);
  for (int unit = model.num_units() - 1; unit >= 0; --unit) {  // in the backward's order
    dp.BeginUnitBackward(unit);
    dp.OnGradsReady(model.unit_begin(unit));
  }
}

void TrainerRanks::GatherWeights(parallel::DataParallel& dp, model::Llama& model,
                                 const kernels::KernelCtx& ctx) {
  if (dp.options().zero == 0) return;
  model::LlamaParams& params = model.params();
  dp.GatherWeights(params.weights());
  if (params.has_bf16()) model.RefreshBf16Weights(ctx);
}

void TrainerRanks::BeginDelayedStep(model::Llama& model) {
  if (model::Fp8DelayedScaling* delayed = model.fp8_delayed()) delayed->BeginStep();
}

void TrainerRanks::EndDelayedStep(model::Llama& model) {
  model::Fp8DelayedScaling* delayed = model.fp8_delayed();
  if (delayed == nullptr) return;
  std::span<float> amax = delayed->step_amax();
  for (float& a : amax) a = std::isnan(a) ? std::numeric_limits<float>::infinity() : a;
  if (size() > 1) group_.AllReduce(amax, comm::ReduceOp::kMax);
  delayed->EndStep();
}

std::pair<int64_t, int64_t> TrainerRanks::SlotRows(int64_t r0, int64_t r1, int slot) const {
  const int64_t n = r1 - r0, s = slots();
  return {r0 + n * slot / s, r0 + n * (slot + 1) / s};
}

std::pair<int64_t, int64_t> TrainerRanks::Share(int64_t n, int rank) const {
  return {n * rank / size(), n * (rank + 1) / size()};
}

void TrainerRanks::GatherShares(std::span<const int64_t> first, std::span<double> values) {
  if (size() == 1) return;
  ANVIL_TRACE_ZONE("gather_shares");
  const int64_t rows = static_cast<int64_t>(first.size()) - 1;
  std::vector<int64_t> counts(size());
  for (int r = 0; r < size(); ++r) {
    const auto [a, b] = Share(rows, r);
    counts[r] = first[b] - first[a];
  }
  const auto [a, b] = Share(rows);
  const std::vector<double> mine(values.begin() + (first[a] - first[0]),
                                 values.begin() + (first[b] - first[0]));
  group_.AllGather(std::span<const double>(mine), values, counts);
}

std::vector<double> TrainerRanks::AllSlots(std::span<const double> mine, int64_t width) {
  CHECK_EQ(static_cast<int64_t>(mine.size()), grad_accum_ * width);
  if (size() == 1) return {mine.begin(), mine.end()};
  std::vector<double> by_rank(static_cast<size_t>(slots() * width));
  group_.AllGather(mine, std::span<double>(by_rank),
                   std::vector<int64_t>(size(), grad_accum_ * width));
  // Rank r's micro-batch i is slot i * ranks + r.
  std::vector<double> by_slot(by_rank.size());
  for (int r = 0; r < size(); ++r) {
    for (int i = 0; i < grad_accum_; ++i) {
      std::copy_n(by_rank.begin() + (static_cast<int64_t>(r) * grad_accum_ + i) * width, width,
                  by_slot.begin() + (static_cast<int64_t>(i) * size() + r) * width);
    }
  }
  return by_slot;
}

Status CheckSameKernels(comm::Group& trainers, const std::string& mine) {
  if (trainers.size() == 1) return Status::Ok();
  std::array<char, 64> name{};
  std::copy_n(mine.begin(), std::min(mine.size(), name.size() - 1), name.begin());
  trainers.Broadcast(std::as_writable_bytes(std::span<char>(name)), 0);
  const int odd = mine != name.data() ? trainers.rank() : 0;
  if (const int last = trainers.AllReduceValue(odd, comm::ReduceOp::kMax); last != 0) {
    return InvalidArgument(fmt::format(
        "trainer rank {} runs {} kernels, rank 0 the {}: their gradients would differ; run "
        "every rank with the same ANVIL_ISA and ANVIL_AMX",
        last, odd == last ? "the " + mine : std::string("other"), name.data()));
  }
  return Status::Ok();
}

int64_t SlotRowsAtMost(int64_t rows, int64_t minibatches, int64_t slots) {
  const int64_t update = (rows + minibatches - 1) / minibatches;
  return std::max<int64_t>(1, (update + slots - 1) / slots);
}

Result<Rollouts> GenerateShared(infer::RolloutEngine& engine, const kernels::KernelCtx& ctx,
                                std::span<const std::vector<int32_t>> prompts, int64_t step,
                                TrainerRanks& ranks, const std::function<bool()>& cancel) {
  const int64_t n = static_cast<int64_t>(prompts.size());
  if (ranks.size() == 1) return GenerateRollouts(engine, ctx, prompts, step, cancel);
  ANVIL_TRACE_ZONE("rollouts");
  const auto [p0, p1] = ranks.Share(n);
  Rollouts r;
  r.sampling = engine.options().sampling;
  r.group_size = engine.options().samples;
  std::vector<infer::RolloutSample> mine;
  infer::RolloutStats stats;
  Status drawn = Status::Ok();
  if (p1 > p0) {  // a rank without a prompt still meets the others below
    Result<Rollouts> own = GenerateRollouts(engine, ctx, prompts.subspan(p0, p1 - p0), step, cancel,
                                            /*step_prompts=*/n, /*first_prompt=*/p0);
    if (own.ok()) {
      mine = std::move(own->samples);
      stats = own->stats;
      for (infer::RolloutSample& s : mine) s.request += p0;  // its index in the step
    } else {
      drawn = own.status();
    }
  }
  // One rank's failed (or cut) draw ends the step on every rank (none waits
  // for its samples).
  RETURN_IF_ERROR(AgreeOnOutcome(ranks.group(), drawn, "to draw its rollouts", "the rollouts"));
  comm::Group& group = ranks.group();
  const SamplesWire wire = EncodeSamples(mine);
  SamplesWire all;
  GatherVectors(group, std::span<const int64_t>(wire.meta), all.meta);
  GatherVectors(group, std::span<const int32_t>(wire.tokens), all.tokens);
  GatherVectors(group, std::span<const double>(wire.logprobs), all.logprobs);
  r.samples = DecodeSamples(all);
  std::array<int64_t, 2> tokens = {stats.prompt_tokens, stats.new_tokens};
  group.AllReduce(std::span<int64_t>(tokens));
  r.stats.prompt_tokens = tokens[0];
  r.stats.new_tokens = tokens[1];
  r.stats.steps = group.AllReduceValue(stats.steps, comm::ReduceOp::kMax);
  r.stats.seconds = group.AllReduceValue(stats.seconds, comm::ReduceOp::kMax);
  r.stats.engine_bytes = stats.engine_bytes;
  return r;
}

void BroadcastRollouts(comm::Group& group, int root, Rollouts& r) {
  if (group.size() == 1) return;
  ANVIL_TRACE_ZONE("broadcast_rollouts");
  SamplesWire wire;
  if (group.rank() == root) wire = EncodeSamples(r.samples);
  const infer::SamplingConfig& s = r.sampling;
  std::array<int64_t, 11> head = {static_cast<int64_t>(wire.meta.size()),
                                  static_cast<int64_t>(wire.tokens.size()),
                                  r.group_size,
                                  r.staleness,
                                  r.stats.prompt_tokens,
                                  r.stats.new_tokens,
                                  r.stats.steps,
                                  r.stats.engine_bytes,
                                  s.greedy,
                                  s.top_k,
                                  static_cast<int64_t>(s.seed)};
  std::array<double, 3> reals = {r.stats.seconds, s.temperature, s.top_p};
  group.Broadcast(std::span<int64_t>(head), root);
  group.Broadcast(std::span<double>(reals), root);
  wire.meta.resize(static_cast<size_t>(head[0]));
  wire.tokens.resize(static_cast<size_t>(head[1]));
  wire.logprobs.resize(wire.tokens.size());
  group.Broadcast(std::span<int64_t>(wire.meta), root);
  group.Broadcast(std::span<int32_t>(wire.tokens), root);
  group.Broadcast(std::span<double>(wire.logprobs), root);
  if (group.rank() == root) return;
  r.samples = DecodeSamples(wire);
  r.group_size = static_cast<int>(head[2]);
  r.staleness = static_cast<int>(head[3]);
  r.stats = {.prompt_tokens = head[4],
             .new_tokens = head[5],
             .steps = head[6],
             .seconds = reals[0],
             .engine_bytes = head[7]};
  r.sampling = {.greedy = head[8] != 0,
                .temperature = reals[1],
                .top_k = static_cast<int>(head[9]),
                .top_p = reals[2],
                .seed = static_cast<uint64_t>(head[10])};
}

}  // namespace anvil::rl
