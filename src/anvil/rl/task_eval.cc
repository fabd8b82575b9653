// Held-out accuracy (task_eval.h).
#include "anvil/rl/task_eval.h"

#include <fmt/core.h>

#include <algorithm>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/infer/rollout.h"
#include "anvil/rl/reward.h"

namespace anvil::rl {

Result<TaskEval> EvaluateHeldOut(Policy& policy, const TaskConfig& task, int64_t problems,
                                 int64_t max_batch, int64_t max_new) {
  if (problems < 1) return InvalidArgument("held-out evaluation needs at least one problem");
  Stopwatch watch;
  std::vector<Problem> held_out;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < problems; ++i) {
    held_out.push_back(MakeProblem(task, Split::kHeldOut, static_cast<uint64_t>(i)));
    prompts.push_back(policy.PromptTokens(held_out.back().prompt));
  }
  infer::RolloutEngine engine(policy.llama->forward_weights(),
                              {.max_batch = std::clamp<int64_t>(max_batch, 1, problems),
                               .max_new = max_new,
                               .samples = 1,
                               .eos = policy.eos(),
                               .sampling = {.greedy = true}});
  ASSIGN_OR_RETURN(const std::vector<infer::RolloutSample> answers,
                   engine.Generate(*policy.ctx, prompts));
  TaskEval e;
  e.problems = problems;
  for (const infer::RolloutSample& s : answers) {
    const std::string text = policy.Text(s.tokens);
    const RewardResult r = TaskReward(task.task, held_out[s.request], text);
    e.accuracy += r.correct;
    e.well_formed += r.well_formed;
    e.mean_tokens += static_cast<double>(s.tokens.size());
    if (s.request == 0) e.example = held_out[0].prompt + text;
  }
  const double n = static_cast<double>(problems);
  e.accuracy /= n;
  e.well_formed /= n;
  e.mean_tokens /= n;
  e.seconds = watch.Seconds();
  return e;
}

}  // namespace anvil::rl
