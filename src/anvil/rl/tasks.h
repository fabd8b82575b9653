// RL tasks with verifiable answers, generated from a seed (no downloads):
// multi-digit addition, sorting a short list, and templated arithmetic word
// problems. Problem i of a split is a pure function of (task settings, seed,
// split, i); the train and held-out splits are disjoint by construction (a
// problem belongs to the held-out split when a hash of its prompt says so,
// one in ten, and each split skips the other's).
//
// Rewards (reward.h): exact match of the answer, plus a smaller reward for a
// well-formed one (a number, or a list of them).
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/config.h"
#include "anvil/core/status.h"

namespace anvil::rl {

enum class Task : uint8_t { kAddition, kSorting, kWordProblem };
enum class Split : uint8_t { kTrain, kHeldOut };

Result<Task> ParseTask(const std::string& name);  // "addition" | "sorting" | "word_problem"
const char* TaskName(Task task);

struct TaskConfig {
  Task task = Task::kAddition;
  int digits = 3;    // addition: operands of up to this many digits (1..9)
  int list_len = 5;  // sorting: numbers in a list (2..16), each 0..99
  uint64_t seed = 0;

  // The "task.*" keys: name ("addition" | "sorting" | "word_problem"),
  // digits, list_len, seed; absent ones keep the defaults above.
  static Result<TaskConfig> FromConfig(Config& config);
  Status Validate() const;
};

struct Problem {
  std::string prompt;  // e.g. "123+456="
  std::string answer;  // e.g. "579" (sorting: "1 3 5 9")
};

Problem MakeProblem(const TaskConfig& config, Split split, uint64_t index);

}  // namespace anvil::rl
