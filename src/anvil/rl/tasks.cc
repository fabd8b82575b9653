// Seeded task generators (tasks.h).
#include "anvil/rl/tasks.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "anvil/core/check.h"
#include "anvil/core/rng.h"
#include "anvil/rl/reward.h"

namespace anvil::rl {
namespace {

// Random values a candidate problem may draw.
constexpr uint64_t kValuesPerCandidate = 32;

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The pairs as read, split included.
uint64_t HashOf(const ProblemPairs& pairs, int64_t held_out) {
  uint64_t h = Fnv1a(fmt::format("held_out {}", held_out));
  for (const std::vector<Problem>* list : {&pairs.train, &pairs.held_out}) {
    for (const Problem& p : *list) {
      h = (h ^ Fnv1a(p.prompt)) * 1099511628211ull;
      h = (h ^ Fnv1a(p.answer)) * 1099511628211ull;
    }
  }
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
    case Task::kPairs:
      break;  // (read from their file: MakeProblem)
  }
  return {};
}

}  // namespace

Result<Task> ParseTask(const std::string& name) {
  if (name == "addition") return Task::kAddition;
  if (name == "sorting") return Task::kSorting;
  if (name == "word_problem") return Task::kWordProblem;
  if (name == "pairs") return Task::kPairs;
  return InvalidArgument(
      fmt::format("task '{}': expected addition, sorting, word_problem or pairs", name));
}

const char* TaskName(Task task) {
  switch (task) {
    case Task::kAddition: return "addition";
    case Task::kSorting: return "sorting";
    case Task::kWordProblem: return "word_problem";
    case Task::kPairs:
      return "pairs";
  }
  return "?";
}

Result<ProblemPairs> ReadProblemPairs(const std::string& path, int64_t held_out) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("task.data {}: cannot open it", path));
  std::vector<Problem> all;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // a blank line
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const auto text = [&](const char* key) -> const std::string* {
      if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return nullptr;
      return j[key].get_ptr<const std::string*>();
    };
    const std::string *prompt = text("prompt"), *response = text("response");
    // (an answer is compared up to its first line, spaces around it
    // ignored: a blank one would reward an empty completion)
    if (prompt == nullptr || response == nullptr || prompt->empty() ||
        AnswerOf(*response).empty()) {
      return InvalidArgument(fmt::format(
          "task.data {} line {}: expected {{\"prompt\": \"...\", \"response\": \"...\"}}, "
          "the prompt non-empty and the response's first line not blank",
          path, number));
    }
    all.push_back({*prompt, *response});
  }
  if (in.bad()) return IoError(fmt::format("task.data {}: a read failed", path));
  if (held_out < 1 || held_out >= static_cast<int64_t>(all.size())) {
    return InvalidArgument(fmt::format(
        "task.data {} holds {} pairs; task.held_out = {} must leave at least one to train on "
        "and hold out at least one",
        path, all.size(), held_out));
  }
  ProblemPairs pairs;
  pairs.held_out.assign(all.end() - held_out, all.end());
  all.resize(all.size() - held_out);
  pairs.train = std::move(all);
  return pairs;
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
  ASSIGN_OR_RETURN(c.data, config.GetString("task.data", c.data));
  ASSIGN_OR_RETURN(c.held_out, config.GetInt("task.held_out", c.held_out));
  if (c.task == Task::kPairs) {
    if (c.data.empty()) {
      return InvalidArgument("task.name = \"pairs\" needs task.data: a JSON-lines file of pairs");
    }
    // Recorded by its absolute path and by its pairs' hash (in the run's
    // config.toml, which a resume reads): a resume, from any folder, reads
    // the same pairs or is refused.
    std::error_code error;
    const std::string absolute = std::filesystem::absolute(c.data, error).lexically_normal();
    if (!error) {
      c.data = absolute;
      config.Resolve("task.data", absolute);
    }
    ASSIGN_OR_RETURN(ProblemPairs pairs, ReadProblemPairs(c.data, c.held_out));
    ASSIGN_OR_RETURN(const std::string recorded, config.GetString("task.data_hash", ""));
    const std::string hash = fmt::format("{:016x}", HashOf(pairs, c.held_out));
    if (!recorded.empty() && recorded != hash) {
      return InvalidArgument(fmt::format(
          "task.data {} holds other pairs than the run recorded (task.data_hash {}, now {}): "
          "restore the file, or start a new run",
          c.data, recorded, hash));
    }
    config.Resolve("task.data_hash", hash);
    c.pairs = std::make_shared<const ProblemPairs>(std::move(pairs));
  } else if (!c.data.empty()) {
    return InvalidArgument(fmt::format(
        "task.data = \"{}\" is read by task.name = \"pairs\" only (here \"{}\")", c.data, name));
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

int64_t TaskConfig::SplitSize(Split split) const {
  if (task != Task::kPairs || pairs == nullptr) return 0;
  return static_cast<int64_t>(split == Split::kTrain ? pairs->train.size()
                                                     : pairs->held_out.size());
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
  if (config.task == Task::kPairs) {
    CHECK(config.pairs != nullptr) << "a pairs task without its pairs (TaskConfig::FromConfig)";
    const std::vector<Problem>& list =
        split == Split::kTrain ? config.pairs->train : config.pairs->held_out;
    CHECK(!list.empty()) << "a pairs task with an empty split";
    return list[index % list.size()];
  }
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
