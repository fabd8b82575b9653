// RL tasks with verifiable answers, generated from a seed (no downloads):
// multi-digit addition, sorting a short list, and templated arithmetic word
// problems. Problem i of a split is a pure function of (task settings, seed,
// split, i); the train and held-out splits are disjoint by construction (a
// problem belongs to the held-out split when a hash of its prompt says so,
// one in ten, and each split skips the other's).
//
// Or a user's own prompt/answer pairs (task.name = "pairs"): a JSON-lines
// file (task.data), each line {"prompt": ..., "response": ...}; its last
// task.held_out pairs are the held-out split and the others the train
// split, and problem i of a split is its pair i modulo the split's size (in
// the file's order).
//
// Rewards (reward.h): exact match of the answer, plus a smaller reward for a
// well-formed one (a number, or a list of them; for pairs, any non-empty
// answer).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "anvil/core/config.h"
#include "anvil/core/status.h"

namespace anvil::rl {

enum class Task : uint8_t { kAddition, kSorting, kWordProblem, kPairs };
enum class Split : uint8_t { kTrain, kHeldOut };

// "addition" | "sorting" | "word_problem" | "pairs"
Result<Task> ParseTask(const std::string& name);
const char* TaskName(Task task);

struct Problem {
  std::string prompt;  // e.g. "123+456="
  std::string answer;  // e.g. "579" (sorting: "1 3 5 9")
};

// A pairs task's problems, as read from its file.
struct ProblemPairs {
  std::vector<Problem> train, held_out;
};

// The pairs of a JSON-lines file (see above), the last `held_out` of them
// held out; errors name the file and line.
Result<ProblemPairs> ReadProblemPairs(const std::string& path, int64_t held_out);

struct TaskConfig {
  Task task = Task::kAddition;
  int digits = 3;    // addition: operands of up to this many digits (1..9)
  int list_len = 5;  // sorting: numbers in a list (2..16), each 0..99
  uint64_t seed = 0;
  // pairs: the file, how many of its pairs are held out, and the pairs.
  std::string data = {};
  int64_t held_out = 100;
  std::shared_ptr<const ProblemPairs> pairs = nullptr;

  // The "task.*" keys: name ("addition" | "sorting" | "word_problem" |
  // "pairs"), digits, list_len, seed, data, held_out; absent ones keep the
  // defaults above. A pairs task reads its file here.
  static Result<TaskConfig> FromConfig(Config& config);
  Status Validate() const;
  // Problems in a split: a pairs task's count, else none (unbounded).
  int64_t SplitSize(Split split) const;
};

Problem MakeProblem(const TaskConfig& config, Split split, uint64_t index);

}  // namespace anvil::rl
