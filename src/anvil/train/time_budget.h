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
//
// A few steps are a short measurement on a shared machine whose speed drifts
// (a Zen 3 host ran its first steps at 4.2k tokens/s and the next minutes at
// 3.1-4.0k: the fitted run overran by 15% and max_minutes cut its cosine). So
// the fit is checked again (BudgetRefit, train.time_budget_refit) from the wall
// time of all the steps since it, evaluations and checkpoints included, and
// train.steps moves (within the configured count) where the check disagrees;
// the cosine then ends at the new count, from an LR a little off the old curve.
// Checks run in the session that made the fit; a resumed run keeps the count
// its config.toml holds (which a check may have changed after the checkpoint
// it resumes from was written: after a crash, the steps since then run on the
// newer cosine).
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

// When the fit is checked again: every tenth of the run left at the first fit
// (at step `fitted_at`, choosing `first_fit` steps in all),
// while under kLastFraction of the current plan is done (late changes would
// bend the cosine's tail). A check moves train.steps only by more than
// kMinChange of it, so noise does not move the LR curve back and forth.
struct BudgetRefit {
  static constexpr int64_t kChecks = 10;
  static constexpr double kLastFraction = 0.8;
  static constexpr double kMinChange = 0.02;
  static bool Due(int64_t step, int64_t fitted_at, int64_t first_fit, int64_t planned_steps);
  static bool Moves(int64_t planned_steps, int64_t new_steps);
};

}  // namespace anvil::train
