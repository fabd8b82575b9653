// Seeded task generators (tasks.h).
#include "anvil/rl/tasks.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "anvil/core/rng.h"

namespace anvil::rl {
namespace {

// Random values a candidate problem may draw.
constexpr uint64_t kValuesPerCandidate = 32;

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

Split SplitOf(const std::string& prompt) {
  return Fnv1a(prompt) % 10 == 0 ? Split::kHeldOut : Split::kTrain;
}

struct Draws {
  const RngStream& rng;
  uint64_t base;
  uint64_t next = 0;
  uint32_t Below(uint32_t n) { return rng.U32(base + next++) % n; }
};

uint64_t Pow10(int d) {
  uint64_t p = 1;
  for (int i = 0; i < d; ++i) p *= 10;
  return p;
}

Problem Candidate(const TaskConfig& c, Draws& d) {
  switch (c.task) {
    case Task::kAddition: {
      const uint64_t limit = Pow10(c.digits);
      const uint64_t a = (uint64_t{d.Below(1u << 30)} << 30 | d.Below(1u << 30)) % limit;
      const uint64_t b = (uint64_t{d.Below(1u << 30)} << 30 | d.Below(1u << 30)) % limit;
      return {fmt::format("{}+{}=", a, b), fmt::format("{}", a + b)};
    }
    case Task::kSorting: {
      std::vector<int> v(c.list_len);
      for (int& x : v) x = static_cast<int>(d.Below(100));
      std::string prompt = "sort";
      for (int x : v) prompt += fmt::format(" {}", x);
      prompt += ":";
      std::sort(v.begin(), v.end());
      std::string answer;
      for (size_t i = 0; i < v.size(); ++i) answer += fmt::format("{}{}", i ? " " : "", v[i]);
      return {prompt, answer};
    }
    case Task::kWordProblem: {
      static constexpr std::array<const char*, 6> kNames = {"Ann", "Ben", "Cara", "Dev", "Eli",
                                                             "Fay"};
      static constexpr std::array<const char*, 5> kItems = {"apples", "books", "coins", "pens",
                                                            "shells"};
      const char* name = kNames[d.Below(kNames.size())];
      const char* item = kItems[d.Below(kItems.size())];
      const int x = 1 + static_cast<int>(d.Below(50));
      const int y = 1 + static_cast<int>(d.Below(50));
      if (d.Below(2) == 0) {
        return {fmt::format("{} has {} {} and gets {} more. How many {} does {} have? Answer:",
                            name, x, item, y, item, name),
                fmt::format("{}", x + y)};
      }
      const int hi = std::max(x, y), lo = std::min(x, y);
      return {fmt::format("{} has {} {} and gives away {}. How many {} does {} have? Answer:",
                          name, hi, item, lo, item, name),
              fmt::format("{}", hi - lo)};
    }
  }
  return {};
}

}  // namespace

Result<Task> ParseTask(const std::string& name) {
  if (name == "addition") return Task::kAddition;
  if (name == "sorting") return Task::kSorting;
  if (name == "word_problem") return Task::kWordProblem;
  return InvalidArgument(
      fmt::format("task '{}': expected addition, sorting or word_problem", name));
}

const char* TaskName(Task task) {
  switch (task) {
    case Task::kAddition: return "addition";
    case Task::kSorting: return "sorting";
    case Task::kWordProblem: return "word_problem";
  }
  return "?";
}

Result<TaskConfig> TaskConfig::FromConfig(Config& config) {
  TaskConfig c;
  ASSIGN_OR_RETURN(const std::string name, config.GetString("task.name", TaskName(c.task)));
  ASSIGN_OR_RETURN(c.task, ParseTask(name));
  ASSIGN_OR_RETURN(const int64_t digits, config.GetInt("task.digits", c.digits));
  ASSIGN_OR_RETURN(const int64_t list_len, config.GetInt("task.list_len", c.list_len));
  ASSIGN_OR_RETURN(const int64_t seed, config.GetInt("task.seed", 0));
  if (digits < 1 || digits > 9 || list_len < 2 || list_len > 16 || seed < 0) {
    return InvalidArgument(fmt::format(
        "task.digits = {} (1..9), task.list_len = {} (2..16), task.seed = {} (>= 0)", digits,
        list_len, seed));
  }
  c.digits = static_cast<int>(digits);
  c.list_len = static_cast<int>(list_len);
  c.seed = static_cast<uint64_t>(seed);
  RETURN_IF_ERROR(c.Validate());
  return c;
}

Status TaskConfig::Validate() const {
  if (digits < 1 || digits > 9) {
    return InvalidArgument(fmt::format("task digits {}: expected 1..9", digits));
  }
  if (list_len < 2 || list_len > 16) {
    return InvalidArgument(fmt::format("task list_len {}: expected 2..16", list_len));
  }
  return Status::Ok();
}

Problem MakeProblem(const TaskConfig& config, Split split, uint64_t index) {
  // Candidates until one hashes into the split (about 1.1 tries for train,
  // 10 for held-out).
  // Attempt a of problem i: values [32 i, 32 i + 32) of the stream (seed,
  // split, attempt a), so no two candidates share a number.
  for (uint32_t attempt = 0;; ++attempt) {
    const RngStream rng(config.seed, RngPurpose::kTasks, static_cast<uint32_t>(split), attempt);
    Draws d{rng, index * kValuesPerCandidate};
    Problem p = Candidate(config, d);
    if (SplitOf(p.prompt) == split) return p;
  }
}

}  // namespace anvil::rl
