// machine.json writing and reading (see report_machine.h).
#include "anvil/train/report_machine.h"

#include <unistd.h>

#include <ctime>
#include <nlohmann/json.hpp>

#include <fmt/core.h>

#include "anvil/core/cpu_features.h"
#include "anvil/core/file_util.h"
#include "anvil/profile/machine.h"

// Set by CMake on this file alone (the same values `anvil --version` prints),
// so a new commit recompiles one file rather than the layer.
#ifndef ANVIL_REPORT_VERSION
#define ANVIL_REPORT_VERSION "unknown"
#endif
#ifndef ANVIL_REPORT_GIT_COMMIT
#define ANVIL_REPORT_GIT_COMMIT "unknown"
#endif

namespace anvil::train {
namespace {

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// Display labels of the keys WriteMachineJson writes; other keys show as-is.
std::string Label(const std::string& key) {
  static const std::pair<const char*, const char*> kLabels[] = {
      {"cpu_model", "CPU"},
      {"logical_cpus", "logical CPUs"},
      {"threads", "trainer threads"},
      {"memory_bytes", "memory"},
      {"isa", "SIMD tier used"},
      {"cpu_features", "CPU features"},
      {"precision", "precision"},
      {"peak_gflops", "peak GFLOP/s (MFU denominator)"},
      {"peak_source", "peak from"},
      {"anvil_version", "anvil version"},
      {"git_commit", "git commit"},
      {"hostname", "host"},
      {"started_at", "session started (UTC)"},
  };
  for (const auto& [k, label] : kLabels) {
    if (key == k) return label;
  }
  return key;
}

std::string Display(const std::string& key, const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (key == "memory_bytes" && v.is_number()) {
    return fmt::format("{:.1f} GiB", v.get<double>() / double(1L << 30));
  }
  if (key == "peak_gflops" && v.is_number()) return fmt::format("{:.1f}", v.get<double>());
  return v.dump();
}

}  // namespace

std::string UtcNow(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), format, &tm);
  return buf;
}

Status WriteMachineJson(const std::string& path, const RunMachine& run) {
  const profile::MachineInfo m = profile::DescribeMachine();
  nlohmann::ordered_json j;
  j["cpu_model"] = m.cpu_model;
  j["logical_cpus"] = m.logical_cpus;
  j["threads"] = run.threads;
  j["memory_bytes"] = m.memory_bytes;
  j["isa"] = run.isa;
  j["cpu_features"] = GetCpuFeatures().ToString();
  j["precision"] = run.precision;
  j["peak_gflops"] = run.peak_gflops;
  j["peak_source"] = !run.peak_measured      ? "given by the caller"
                     : run.peak_note.empty() ? "measured at startup"
                                             : run.peak_note;
  j["anvil_version"] = ANVIL_REPORT_VERSION;
  j["git_commit"] = ANVIL_REPORT_GIT_COMMIT;
  j["hostname"] = HostName();
  j["started_at"] = run.started_at.empty() ? UtcNow() : run.started_at;
  return WriteFileAtomic(path, j.dump(2) + "\n");
}

Result<std::vector<std::pair<std::string, std::string>>> ReadMachineJson(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object()) return InvalidArgument(fmt::format("{}: not a JSON object", path));
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [key, value] : j.items()) rows.emplace_back(Label(key), Display(key, value));
  return rows;
}

}  // namespace anvil::train
