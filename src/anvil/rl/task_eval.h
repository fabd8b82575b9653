// A policy's accuracy on a task's held-out problems: the greedy answer of
// each (through the rollout engine, as a user would sample it), scored by
// TaskReward. Deterministic: the same weights give the same figures for any
// batch size or thread count (the decoder is batch invariant).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"
#include "anvil/rl/policy.h"
#include "anvil/rl/tasks.h"

namespace anvil::rl {

struct TaskEval {
  int64_t problems = 0;
  double accuracy = 0;     // share answered exactly
  double well_formed = 0;  // share whose answer has the task's shape
  double mean_tokens = 0;  // completion length, eos included
  double seconds = 0;
  std::string example{};  // the first problem and its answer, for a log line
};

// Held-out problems [0, problems) of `task`, decoded `max_batch` at a time,
// up to `max_new` tokens each. With `ranks` (every rank holding the same
// weights, all calling this), each rank decodes one contiguous share of the
// problems and every rank gets the whole figures: the same as one process
// (the counts are exact; each answer is batch invariant). `example` is then
// the first rank's alone; `seconds` each rank's, waits included. `cancel`
// (may be empty) is polled before each of this rank's decode steps: where
// it cut one rank's share, every rank returns kCancelled.
Result<TaskEval> EvaluateHeldOut(Policy& policy, const TaskConfig& task, int64_t problems,
                                 int64_t max_batch, int64_t max_new, comm::Group* ranks = nullptr,
                                 const std::function<bool()>& cancel = {});

// Whether held-out problems [0, problems) of `task` leave room in the
// policy's context for an answer; else an error naming the first that does
// not (a file of pairs may hold long ones).
Status CheckHeldOutFits(const Policy& policy, const TaskConfig& task, int64_t problems);

}  // namespace anvil::rl
