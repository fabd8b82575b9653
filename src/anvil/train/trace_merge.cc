// MergeRankTraces (see trace_merge.h).
#include "anvil/train/trace_merge.h"

#include <fmt/core.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "anvil/core/file_util.h"

namespace anvil::train {

Status MergeRankTraces(const std::string& run_dir, int ranks, const std::string& out) {
  nlohmann::json merged = {{"traceEvents", nlohmann::json::array()}};
  nlohmann::json& events = merged["traceEvents"];
  std::vector<std::string> paths;
  for (int r = 0; r < ranks; ++r) {
    paths.push_back(fmt::format("{}/trace.rank{}.json", run_dir, r));
    ASSIGN_OR_RETURN(const std::string text, ReadFile(paths.back()));
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.contains("traceEvents") || !j["traceEvents"].is_array()) {
      return DataLoss(fmt::format("{}: not a Chrome trace", paths.back()));
    }
    for (const nlohmann::json& e : j["traceEvents"]) events.push_back(e);
  }
  RETURN_IF_ERROR(WriteFileAtomic(out, merged.dump() + "\n"));
  std::error_code ec;
  for (const std::string& p : paths) std::filesystem::remove(p, ec);
  return Status::Ok();
}

}  // namespace anvil::train
