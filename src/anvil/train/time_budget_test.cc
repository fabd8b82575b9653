// The time-budget plan: what fits, what is kept at least, and when the
// measurement ends.
#include "anvil/train/time_budget.h"

#include <gtest/gtest.h>

namespace anvil::train {
namespace {

BudgetInputs Base() {
  return {.budget_seconds = 100, .elapsed_seconds = 3, .step = 10, .configured_steps = 1000,
          .step_seconds = 0.1};
}

TEST(TimeBudgetTest, KeepsTheConfiguredStepsWhenTheyFit) {
  BudgetInputs in = Base();
  in.configured_steps = 500;  // 490 more steps: 49 s of 97 - 3 available
  const BudgetPlan plan = PlanToBudget(in);
  EXPECT_EQ(plan.steps, 500);
  EXPECT_FALSE(plan.shortened);
  EXPECT_NEAR(plan.expected_seconds, 3 + 49, 1e-9);
}

TEST(TimeBudgetTest, ShortensToWhatFitsInTheBudget) {
  const BudgetPlan plan = PlanToBudget(Base());
  // (100 * 0.97 - 3) / 0.1 = 940 more steps.
  EXPECT_EQ(plan.steps, 10 + 940);
  EXPECT_TRUE(plan.shortened);
  EXPECT_LE(plan.expected_seconds, 100 * 0.97 + 1e-9);
}

TEST(TimeBudgetTest, CountsEvaluationsAndCheckpoints) {
  BudgetInputs in = Base();
  in.eval_every = 10;
  in.eval_seconds = 0.5;         // +0.05 s per step, and one at the end
  in.checkpoint_every = 100;
  in.checkpoint_seconds = 1.0;   // +0.01 s per step, and one at the end
  const BudgetPlan plan = PlanToBudget(in);
  // (97 - 3 - 1.5) / 0.16 = 578.1 -> 578 more steps.
  EXPECT_EQ(plan.steps, 10 + 578);
  EXPECT_LE(plan.expected_seconds, 97 + 1e-9);
}

TEST(TimeBudgetTest, AlwaysKeepsOneMoreStepButNeverAddsSteps) {
  BudgetInputs in = Base();
  in.elapsed_seconds = 500;  // already past the budget
  EXPECT_EQ(PlanToBudget(in).steps, 11);
  in = Base();
  in.step_seconds = 1e-6;  // everything fits many times over
  EXPECT_EQ(PlanToBudget(in).steps, 1000);
  in.step = 1000;  // nothing left to plan
  EXPECT_EQ(PlanToBudget(in).steps, 1000);
}

// Checks of a fit made at step 20 for 120 steps: every 10 steps (a tenth of
// the 100 left) while under 80% of the current plan's rest is done.
TEST(TimeBudgetTest, RefitChecksEveryTenthUpToFourFifths) {
  using R = BudgetRefit;
  EXPECT_FALSE(R::Due(20, 20, 120, 120));  // the fit's own step
  EXPECT_FALSE(R::Due(25, 20, 120, 120));
  EXPECT_TRUE(R::Due(30, 20, 120, 120));
  EXPECT_TRUE(R::Due(90, 20, 120, 120));    // 70 of 100
  EXPECT_FALSE(R::Due(100, 20, 120, 120));  // 80 of 100: the tail is left alone
  EXPECT_FALSE(R::Due(100, 20, 120, 110));  // a plan since lowered ends the checks sooner
  EXPECT_TRUE(R::Due(100, 20, 120, 140));   // or raised, later (the interval stays 10)
  EXPECT_FALSE(R::Due(21, 20, 21, 21));     // a fit with one step left: no checks
  EXPECT_TRUE(R::Due(22, 20, 25, 40));      // under ten left at the fit: every step
}

TEST(TimeBudgetTest, RefitMovesOnlyPastTheThreshold) {
  EXPECT_FALSE(BudgetRefit::Moves(1000, 1000));
  EXPECT_FALSE(BudgetRefit::Moves(1000, 1020));  // 2%: kept
  EXPECT_TRUE(BudgetRefit::Moves(1000, 1021));
  EXPECT_TRUE(BudgetRefit::Moves(1000, 979));
  EXPECT_FALSE(BudgetRefit::Moves(1000, 980));
}

TEST(TimeBudgetTest, MeasurementEndsEarlyInTheWarmup) {
  using T = BudgetTiming;
  EXPECT_FALSE(T::Done(T::kMinSteps - 1, 100.0, 5, 100));  // too few steps, however slow
  EXPECT_TRUE(T::Done(T::kMinSteps, T::kMinSeconds, 5, 100));
  EXPECT_FALSE(T::Done(T::kMinSteps, 0.1, 5, 100));
  EXPECT_TRUE(T::Done(T::kMinSteps, 0.1, 100, 100));       // the warmup ends
  EXPECT_TRUE(T::Done(T::kMaxSteps, 0.1, 30, 100));
}

}  // namespace
}  // namespace anvil::train
