// The time-budget plan (see time_budget.h).
#include "anvil/train/time_budget.h"

#include <algorithm>
#include <cmath>

namespace anvil::train {

BudgetPlan PlanToBudget(const BudgetInputs& in) {
  constexpr double kUse = 0.97;
  // Per step, the periodic evaluations and checkpoints spread over their period.
  double per_step = in.step_seconds;
  if (in.eval_every > 0) per_step += in.eval_seconds / static_cast<double>(in.eval_every);
  if (in.checkpoint_every > 0) {
    per_step += in.checkpoint_seconds / static_cast<double>(in.checkpoint_every);
  }
  // The run always ends with one more validation and checkpoint.
  const double fixed = in.eval_seconds + in.checkpoint_seconds;
  const double left = in.budget_seconds * kUse - in.elapsed_seconds - fixed;
  const int64_t most = in.configured_steps - in.step;
  const double fit = per_step > 0 ? std::floor(std::max(left, 0.0) / per_step)
                                  : static_cast<double>(most);  // free steps: all fit
  const int64_t more = std::clamp<int64_t>(
      static_cast<int64_t>(std::min(fit, static_cast<double>(most))), std::min<int64_t>(1, most),
      most);
  BudgetPlan plan;
  plan.steps = in.step + more;
  plan.shortened = plan.steps < in.configured_steps;
  plan.expected_seconds = in.elapsed_seconds + fixed + static_cast<double>(more) * per_step;
  return plan;
}

bool BudgetTiming::Done(int64_t timed_steps, double timed_seconds, int64_t step,
                        int64_t warmup_steps) {
  if (timed_steps < kMinSteps) return false;
  return timed_seconds >= kMinSeconds || step >= warmup_steps || timed_steps >= kMaxSteps;
}

bool BudgetRefit::Due(int64_t step, int64_t fitted_at, int64_t first_fit, int64_t planned_steps) {
  const int64_t every = std::max<int64_t>(1, (first_fit - fitted_at) / kChecks);
  const int64_t since = step - fitted_at;
  return since > 0 && since % every == 0 &&
         static_cast<double>(since) <
             kLastFraction * static_cast<double>(planned_steps - fitted_at);
}

bool BudgetRefit::Moves(int64_t planned_steps, int64_t new_steps) {
  const int64_t change =
      new_steps > planned_steps ? new_steps - planned_steps : planned_steps - new_steps;
  return static_cast<double>(change) > kMinChange * static_cast<double>(planned_steps);
}

}  // namespace anvil::train
