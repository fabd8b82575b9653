// Held-out accuracy (task_eval.h).
#include "anvil/rl/task_eval.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <span>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/infer/rollout.h"
#include "anvil/rl/reward.h"
#include "anvil/rl/shared_outcome.h"

namespace anvil::rl {

Result<TaskEval> EvaluateHeldOut(Policy& policy, const TaskConfig& task, int64_t problems,
                                 int64_t max_batch, int64_t max_new, comm::Group* ranks,
                                 const std::function<bool()>& cancel) {
  if (problems < 1) return InvalidArgument("held-out evaluation needs at least one problem");
  Stopwatch watch;
  // This rank's share [first, last) of the problems.
  const int64_t size = ranks != nullptr ? ranks->size() : 1,
                rank = ranks != nullptr ? ranks->rank() : 0;
  const int64_t first = problems * rank / size, last = problems * (rank + 1) / size;
  std::vector<Problem> held_out;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = first; i < last; ++i) {
    held_out.push_back(MakeProblem(task, Split::kHeldOut, static_cast<uint64_t>(i)));
    prompts.push_back(policy.PromptTokens(held_out.back().prompt));
  }
  // Correct, well-formed, completion tokens: whole numbers, exact in any order.
  std::array<int64_t, 3> counts{};
  TaskEval e;
  Status decoded = Status::Ok();
  if (!prompts.empty()) {  // a rank without a problem still meets the others below
    infer::RolloutEngine engine(
        policy.llama->forward_weights(),
        {.max_batch = std::clamp<int64_t>(max_batch, 1, static_cast<int64_t>(prompts.size())),
         .max_new = max_new,
         .samples = 1,
         .eos = policy.eos(),
         .sampling = {.greedy = true}});
    Result<std::vector<infer::RolloutSample>> answers =
        engine.Generate(*policy.ctx, prompts, nullptr, 0, cancel);
    if (answers.ok()) {
      for (const infer::RolloutSample& s : *answers) {
        const std::string text = policy.Text(s.tokens);
        const RewardResult r = TaskReward(task.task, held_out[s.request], text);
        counts[0] += r.correct;
        counts[1] += r.well_formed;
        counts[2] += static_cast<int64_t>(s.tokens.size());
        if (first + s.request == 0) e.example = held_out[0].prompt + text;
      }
    } else {
      decoded = answers.status();
    }
  }
  if (ranks != nullptr && ranks->size() > 1) {
    // One rank's failure (or cut) ends the evaluation on every rank (none
    // waits for its counts).
    RETURN_IF_ERROR(AgreeOnOutcome(*ranks, decoded, "its share of the held-out evaluation",
                                   "the held-out evaluation"));
    ranks->AllReduce(std::span<int64_t>(counts));
  }
  RETURN_IF_ERROR(decoded);
  const double n = static_cast<double>(problems);
  e.problems = problems;
  e.accuracy = static_cast<double>(counts[0]) / n;
  e.well_formed = static_cast<double>(counts[1]) / n;
  e.mean_tokens = static_cast<double>(counts[2]) / n;
  e.seconds = watch.Seconds();
  return e;
}

Status CheckHeldOutFits(const Policy& policy, const TaskConfig& task, int64_t problems) {
  for (int64_t i = 0; i < problems; ++i) {
    const Problem p = MakeProblem(task, Split::kHeldOut, static_cast<uint64_t>(i));
    const int64_t n = static_cast<int64_t>(policy.PromptTokens(p.prompt).size());
    if (n >= policy.config.max_seq_len) {
      return InvalidArgument(fmt::format(
          "the held-out problem \"{}\" takes {} tokens as a prompt; model.max_seq_len = {} leaves "
          "no room for its answer",
          p.prompt, n, policy.config.max_seq_len));
    }
  }
  return Status::Ok();
}

}  // namespace anvil::rl
