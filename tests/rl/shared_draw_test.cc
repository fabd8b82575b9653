// Colocated rollouts drawn over the trainer ranks (GenerateShared, under
// mpirun): every rank gets the samples one process draws; a draw cut by a
// stop request on one rank alone ends the call as cancelled on every rank
// (none waits for the others' samples), and the next draw is unchanged; a
// rank's failure outranks another's stop. A held-out evaluation over the
// ranks gives one process's figures, and a cut on one rank cancels it on
// all. Exit 0 when every rank passed.
#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <vector>

#include "anvil/comm/world.h"
#include "anvil/rl/policy_step.h"
#include "anvil/rl/policy_testing.h"
#include "anvil/rl/task_eval.h"
#include "anvil/rl/trainer_ranks.h"
#include "mpi_testing.h"

namespace anvil::rl {
namespace {

using anvil::testing::Expect;
using anvil::testing::g_failures;
using anvil::testing::g_rank;

bool SameSamples(const Rollouts& a, const Rollouts& b) {
  if (a.samples.size() != b.samples.size()) return false;
  for (size_t i = 0; i < a.samples.size(); ++i) {
    if (a.samples[i].tokens != b.samples[i].tokens ||
        a.samples[i].logprobs != b.samples[i].logprobs) {
      return false;
    }
  }
  return true;
}

void Check(comm::Group& world) {
  auto policy = testing::NewMicroPolicy();
  Expect(policy.ok(), "policy");
  if (!policy.ok()) return;
  const infer::RolloutOptions options{
      .max_batch = 8,
      .max_new = 6,
      .samples = 2,
      .eos = policy->eos(),
      .sampling = {.temperature = 1, .top_k = 0, .top_p = 1, .seed = 5}};
  infer::RolloutEngine engine(policy->llama->forward_weights(), options);
  TrainerRanks ranks(world, 1, 0, *policy->llama, nullptr, *policy->pool);
  const std::vector<std::vector<int32_t>> prompts = {
      policy->PromptTokens("1+2="), policy->PromptTokens("3+4="), policy->PromptTokens("5+6="),
      policy->PromptTokens("7+8=")};
  auto alone = GenerateRollouts(engine, *policy->ctx, prompts, 3);
  Expect(alone.ok(), "one process's draw");
  if (!alone.ok()) return;
  auto shared = GenerateShared(engine, *policy->ctx, prompts, 3, ranks);
  Expect(shared.ok() && SameSamples(*shared, *alone), "the shared draw is not one process's");

  // Rank 1 alone is asked to stop: both ranks end the draw as cancelled.
  const bool last = world.rank() == world.size() - 1;
  auto cut = GenerateShared(engine, *policy->ctx, prompts, 3, ranks, [last] { return last; });
  Expect(!cut.ok() && cut.status().code() == StatusCode::kCancelled,
         "a draw cut on the last rank: " + cut.status().ToString());
  auto again = GenerateShared(engine, *policy->ctx, prompts, 3, ranks);
  Expect(again.ok() && SameSamples(*again, *alone), "the draw after a cut one differs");

  // A held-out evaluation over the ranks gives one process's figures; cut
  // on the last rank alone, it ends as cancelled on every rank.
  const TaskConfig task{.digits = 1};
  auto eval_alone = EvaluateHeldOut(*policy, task, 6, 4, 4);
  auto eval_shared = EvaluateHeldOut(*policy, task, 6, 4, 4, &world);
  Expect(eval_alone.ok() && eval_shared.ok() && eval_alone->accuracy == eval_shared->accuracy &&
             eval_alone->mean_tokens == eval_shared->mean_tokens,
         "the shared evaluation is not one process's");
  auto eval_cut = EvaluateHeldOut(*policy, task, 6, 4, 4, &world, [last] { return last; });
  Expect(!eval_cut.ok() && eval_cut.status().code() == StatusCode::kCancelled,
         "an evaluation cut on the last rank: " + eval_cut.status().ToString());

  // The last rank's share holds an empty prompt (its draw fails) while rank
  // 0 is asked to stop: the failure is what every rank reports.
  std::vector<std::vector<int32_t>> bad = prompts;
  bad.back().clear();
  auto failed =
      GenerateShared(engine, *policy->ctx, bad, 3, ranks, [&world] { return world.rank() == 0; });
  Expect(!failed.ok() && failed.status().code() != StatusCode::kCancelled,
         "a failure beside a stop: " + failed.status().ToString());
  if (!last) {
    Expect(failed.status().message().find(
               fmt::format("trainer rank {} failed", world.size() - 1)) != std::string::npos,
           "the failed rank not named: " + failed.status().ToString());
  }
}

int Main() {
  auto world = comm::InitWorld({.timeout_s = 120.0});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  comm::Group& w = **world;
  g_rank = w.rank();
  Check(w);
  const int64_t failures = w.AllReduceValue<int64_t>(g_failures);
  if (g_rank == 0) {
    std::printf("%s: %d ranks, %lld failures\n", failures ? "FAILED" : "ok", w.size(),
                static_cast<long long>(failures));
  }
  comm::FinalizeWorld();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace anvil::rl

int main() { return anvil::rl::Main(); }
