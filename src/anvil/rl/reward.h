// Rewards of RL samples. TaskReward scores a completion against a task's
// answer: 1 for an exact match (each up to its first newline, white space
// around it trimmed), plus `format_weight` for a well-formed answer (a
// number, for sorting a space-separated list of them, for a user's pairs
// any non-blank one), right or wrong.
// CommandReward runs a user's command per sample: {"prompt": ...,
// "completion": ...} as one JSON line on its stdin, one number on its stdout
// (|reward| <= kMaxCommandReward); a command that fails, times out (its
// output still open: a background child holding it counts) or prints
// anything else gives reward 0 and an error saying why, never a crash.
// A run asked to stop (Ctrl-C) need not wait for commands in flight: a
// `cancel` predicate, once true, kills them and skips the ones not started;
// a second Ctrl-C, which ends the process, kills them first (core/child_groups.h).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/rl/tasks.h"

namespace anvil::rl {

struct RewardResult {
  double reward = 0;
  bool correct = false;      // TaskReward: the exact answer
  bool well_formed = false;  // TaskReward: the answer's shape
  std::string error;         // CommandReward: why the reward is 0
  bool cancelled = false;    // CommandReward: stopped (or never started) by `cancel`
};

// The answer part of a completion: up to its first newline, trimmed.
std::string_view AnswerOf(std::string_view completion);

RewardResult TaskReward(Task task, const Problem& problem, std::string_view completion,
                        double format_weight = 0.1);

inline constexpr double kMaxCommandReward = 1e6;

struct RewardInput {
  std::string_view prompt, completion;
};

class CommandReward {
 public:
  // `command` runs under /bin/sh -c.
  CommandReward(std::string command, double timeout_seconds);
  // `cancel` (may be empty) is polled at least every kCancelPollMs while
  // the command runs, from the scoring threads: it must be safe to call from any thread.
  RewardResult Score(std::string_view prompt, std::string_view completion,
                     const std::function<bool()>& cancel = {}) const;
  // Score of each input, in order, with up to `at_once` commands running
  // together (a command mostly waits on its own start-up or on I/O, so more
  // than the cores can run at once).
  std::vector<RewardResult> ScoreAll(std::span<const RewardInput> inputs, int at_once,
                                     const std::function<bool()>& cancel = {}) const;

  static constexpr int kCancelPollMs = 50;

 private:
  std::string command_;
  double timeout_seconds_;
};

}  // namespace anvil::rl
