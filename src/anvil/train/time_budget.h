// Fitting a run's schedule into a wall-clock budget (train.time_budget_minutes).
// A fixed step count finishes in very different times on different machines;
// cutting a run off at a time limit leaves its cosine unfinished (a high LR and
// a poor final loss). Instead, the trainer times a few steps early in the
// warmup (before the step count matters to the LR), then lowers train.steps
// (never raises it) so that the remaining steps, evaluations and checkpoints
// end inside the budget, counted from the session's first step (setup before
// it is not), and the run completes a whole schedule. Limits, said when they
// apply: a budget too short for the warmup ends the run inside it; with
// optim.decay_steps set the cosine keeps its own length; a warmup shorter than
// the measurement (under 5 steps) lets the measured steps run on the original
// cosine, so the run differs slightly from one configured with the new steps.
#pragma once

#include <cstdint>
#include <string>

namespace anvil::train {

// What the plan is made from; times in seconds.
struct BudgetInputs {
  double budget_seconds = 0;    // the whole session's budget
  double elapsed_seconds = 0;   // spent in this session so far
  int64_t step = 0;             // optimizer steps done
  int64_t configured_steps = 0; // train.steps: the most the plan may keep
  double step_seconds = 0;      // measured mean of one optimizer step
  int64_t eval_every = 0;       // train.eval_every (0: at the end only)
  double eval_seconds = 0;      // estimated cost of one validation
  int64_t checkpoint_every = 0; // train.checkpoint_every (0: at the end only)
  double checkpoint_seconds = 0;  // estimated cost of one checkpoint
};

struct BudgetPlan {
  int64_t steps = 0;  // the new train.steps: in [step + 1, configured_steps] (= step when none are left)
  double expected_seconds = 0;    // from the session's start to the end of the run
  bool shortened = false;         // steps < configured_steps
};

// Plans to finish at 97% of the budget (the measurement is of a few steps on
// a machine whose speed drifts); at least one more step is always kept.
BudgetPlan PlanToBudget(const BudgetInputs& in);

// When the measurement ends: after at least kMinSteps timed steps, once they
// took kMinSeconds, or at the warmup's end (so the measured steps ran the same
// LR as in a run configured with the planned steps), or after kMaxSteps.
struct BudgetTiming {
  static constexpr int64_t kMinSteps = 3;
  static constexpr double kMinSeconds = 2.0;
  static constexpr int64_t kMaxSteps = 20;
  static bool Done(int64_t timed_steps, double timed_seconds, int64_t step, int64_t warmup_steps);
};

}  // namespace anvil::train
