// Reading a run folder back (see report_run.h).
#include "anvil/train/report_run.h"

#include <fmt/core.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "anvil/core/file_util.h"
#include "anvil/train/report_machine.h"

namespace anvil::train {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A line's numeric field: NaN when absent (an older writer), an error when
// present but not a number (a file that is not ours, or damaged).
Result<double> Number(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return kNaN;
  if (!it->is_number()) {
    return InvalidArgument(fmt::format("{}: \"{}\" is not a number: {}", where, key, it->dump()));
  }
  return it->get<double>();
}

std::string FolderName(const fs::path& dir) {
  // "runs/x/" has an empty filename; its parent path's is the folder's.
  const fs::path p = dir.filename().empty() ? dir.parent_path() : dir;
  const std::string name = fs::weakly_canonical(p).filename().string();
  return name.empty() ? p.string() : name;
}

}  // namespace

Status ParseMetricsJsonl(const std::string& text, const std::string& path, RunRecord& run) {
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, line_no);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument(fmt::format("{}: not valid JSON ({}); a line torn by a crash can be "
                                         "deleted",
                                         where, e.what()));
    }
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
      return InvalidArgument(fmt::format("{}: not a metrics line (no integer \"step\")", where));
    }
    const int64_t step = j["step"].get<int64_t>();
    if (j.contains("heldout_accuracy")) {  // a post-training run's evaluation
      ASSIGN_OR_RETURN(const double accuracy, Number(j, "heldout_accuracy", where));
      run.heldout_accuracy.emplace_back(step, accuracy);
    } else if (j.contains("val_loss")) {  // the trainer's EvalMetrics line
      EvalMetrics e;
      e.step = step;
      ASSIGN_OR_RETURN(e.val_loss, Number(j, "val_loss", where));
      ASSIGN_OR_RETURN(e.seconds, Number(j, "eval_seconds", where));
      e.val_tokens = j.value("val_tokens", int64_t{0});
      run.evals.push_back(e);
    } else if (j.contains("loss")) {  // the trainer's StepMetrics line
      StepMetrics s;
      s.step = step;
      ASSIGN_OR_RETURN(s.loss, Number(j, "loss", where));
      ASSIGN_OR_RETURN(s.lr, Number(j, "lr", where));
      ASSIGN_OR_RETURN(s.grad_norm, Number(j, "grad_norm", where));
      ASSIGN_OR_RETURN(s.tokens_per_s, Number(j, "tokens_per_s", where));
      ASSIGN_OR_RETURN(s.mfu, Number(j, "mfu", where));
      ASSIGN_OR_RETURN(s.seconds, Number(j, "step_seconds", where));
      ASSIGN_OR_RETURN(const double mem, Number(j, "mem_high_water", where));
      s.mem_high_water = std::isfinite(mem) ? static_cast<int64_t>(mem) : -1;  // -1: unknown
      s.tokens = j.value("tokens", int64_t{0});
      run.steps.push_back(s);
      if (j.contains("reward")) {  // an rl step
        ASSIGN_OR_RETURN(const double reward, Number(j, "reward", where));
        run.rewards.emplace_back(step, reward);
      }
    } else {
      return InvalidArgument(
          fmt::format("{}: neither \"loss\", \"val_loss\" nor \"heldout_accuracy\"", where));
    }
  }
  if (line_no == 0) return InvalidArgument(fmt::format("{}: empty (no steps logged yet?)", path));
  if (run.steps.empty() && run.evals.empty() && run.heldout_accuracy.empty()) {
    return InvalidArgument(fmt::format("{}: no metrics lines", path));
  }
  return Status::Ok();
}

Result<RunRecord> LoadRun(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) {
    return NotFound(fmt::format("{}: no such run folder", run_dir));
  }
  RunRecord run;
  run.dir = run_dir;
  run.name = FolderName(run_dir);

  const std::string metrics_path = (fs::path(run_dir) / "metrics.jsonl").string();
  if (!fs::exists(metrics_path, ec)) {
    return NotFound(
        fmt::format("{}: not found (is {} a folder of `anvil train`, `anvil sft` or `anvil rl`?)",
                    metrics_path, run_dir));
  }
  ASSIGN_OR_RETURN(const std::string text, ReadFile(metrics_path));
  RETURN_IF_ERROR(ParseMetricsJsonl(text, metrics_path, run));

  const std::string config_path = (fs::path(run_dir) / "config.toml").string();
  if (auto config = ReadFile(config_path); config.ok()) {
    run.config_toml = std::move(*config);
  } else {
    run.config_note = config.status().message();
  }

  const std::string machine_path = (fs::path(run_dir) / "machine.json").string();
  if (auto machine = ReadMachineJson(machine_path); machine.ok()) {
    run.machine = std::move(*machine);
  } else if (machine.status().code() == StatusCode::kNotFound) {
    run.machine_note = fmt::format("machine unknown: {} not found (the run predates it)",
                                   machine_path);
  } else {
    run.machine_note = "machine unknown: " + machine.status().message();
  }
  return run;
}

void DisambiguateNames(RunRecord& a, RunRecord& b) {
  if (a.name != b.name) return;
  auto longer = [](const RunRecord& r) {
    const fs::path p = fs::weakly_canonical(fs::path(r.dir));
    const fs::path dir = p.filename().empty() ? p.parent_path() : p;
    return (dir.parent_path().filename() / dir.filename()).string();
  };
  a.name = longer(a);
  b.name = longer(b);
  if (a.name == b.name) {  // the same folder twice
    a.name += " (A)";
    b.name += " (B)";
  }
}

}  // namespace anvil::train
