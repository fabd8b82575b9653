// A run folder read back for `anvil report`: metrics.jsonl parsed into the
// same structs the trainer wrote, the resolved config text and machine.json.
// Only metrics are required; a folder without config.toml or machine.json
// still gets a report that says what is missing.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/train/metrics.h"

namespace anvil::train {

struct RunRecord {
  std::string dir;
  std::string name;  // for legends and headings: the folder's name
  // In file order. Fields a line lacks are NaN (plots skip them), so a file
  // from an older anvil with fewer fields still renders.
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  // Post-training runs (`anvil sft`, `anvil rl`): held-out accuracy at each
  // evaluation, and (rl) the mean reward of each step, as (step, value).
  std::vector<std::pair<int64_t, double>> heldout_accuracy;
  std::vector<std::pair<int64_t, double>> rewards;
  std::optional<std::string> config_toml;  // absent: see config_note
  std::string config_note;
  std::vector<std::pair<std::string, std::string>> machine;  // empty: see machine_note
  std::string machine_note;
};

// Parses metrics.jsonl text; `path` names it in errors, which give the line
// number ("runs/x/metrics.jsonl:17: not valid JSON: ..."). Empty text, or
// text without a single metrics line, is an error too.
Status ParseMetricsJsonl(const std::string& text, const std::string& path, RunRecord& run);

// Reads run_dir. Errors for a missing folder and a missing, empty or corrupt
// metrics.jsonl; a missing or unreadable config.toml / machine.json only
// leaves a note.
Result<RunRecord> LoadRun(const std::string& run_dir);

// Names for two runs' legends: folder names, or parent/name when both
// folders have the same name.
void DisambiguateNames(RunRecord& a, RunRecord& b);

}  // namespace anvil::train
