// trainer_state.json parsing: types and ranges of every field, no exceptions
// out (nlohmann::json throws; it stays inside this file).
#include "anvil/train/trainer_state.h"

#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <cmath>

namespace anvil::train {
namespace {

// `j[key]`, an integer in [lo, hi]. nlohmann's get<> would truncate a float
// (undefined behaviour when out of range) and wrap a negative number.
Result<int64_t> GetInt(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi,
                       const std::string& path) {
  const nlohmann::json& v = j.at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(hi)) {
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= lo &&
      v.get<int64_t>() <= hi) {
    return v.get<int64_t>();
  }
  return DataLoss(
      fmt::format("{}: malformed: {} is not an integer in [{}, {}]", path, key, lo, hi));
}

}  // namespace

Result<TrainerState> ParseTrainerState(std::string_view text, const std::string& path) {
  constexpr int64_t kMax = INT64_MAX;
  TrainerState st;
  try {
    const nlohmann::json s = nlohmann::json::parse(text);
    // Absent in the first checkpoints: format 1.
    if (s.contains("format_version")) {
      ASSIGN_OR_RETURN(st.format_version, GetInt(s, "format_version", 1, 2, path));
    }
    if (st.format_version >= 2) {
      ASSIGN_OR_RETURN(st.global_batch_rows, GetInt(s, "global_batch_rows", 1, kMax, path));
    }
    ASSIGN_OR_RETURN(st.step, GetInt(s, "step", 0, kMax, path));
    ASSIGN_OR_RETURN(st.tokens_seen, GetInt(s, "tokens_seen", 0, kMax, path));
    ASSIGN_OR_RETURN(st.seed, GetInt(s, "seed", INT64_MIN, kMax, path));
    ASSIGN_OR_RETURN(const int64_t epoch, GetInt(s.at("loader"), "epoch", 0, UINT32_MAX, path));
    ASSIGN_OR_RETURN(const int64_t loader_step, GetInt(s.at("loader"), "step", 0, kMax, path));
    st.loader = {static_cast<uint64_t>(epoch), static_cast<uint64_t>(loader_step)};
    ASSIGN_OR_RETURN(st.optimizer_step, GetInt(s, "optimizer_step", 0, kMax, path));
    st.train_shard_checksum = s.at("train_shard_checksum").get<std::string>();
    st.val_shard_checksum = s.at("val_shard_checksum").get<std::string>();
    st.precision = s.at("precision").get<std::string>();
    if (s.contains("kernels")) st.kernels = s.at("kernels").get<std::string>();
    if (s.contains("fp8_high_precision")) {
      st.fp8_high_precision = s.at("fp8_high_precision").get<std::string>();
      if (st.fp8_high_precision != "bf16" && st.fp8_high_precision != "f32") {
        return DataLoss(
            fmt::format("{}: malformed: fp8_high_precision \"{}\"", path, st.fp8_high_precision));
      }
    }
    // Absent in checkpoints made before time budgets existed.
    if (s.contains("schedule_planned")) st.schedule_planned = s.at("schedule_planned").get<bool>();
    if (s.contains("last_eval")) {
      ASSIGN_OR_RETURN(st.val_step, GetInt(s.at("last_eval"), "step", 0, kMax, path));
      st.val_loss = s.at("last_eval").at("val_loss").get<double>();
      if (!std::isfinite(st.val_loss)) {
        return DataLoss(fmt::format("{}: last_eval holds a val_loss of {}", path, st.val_loss));
      }
    }
    if (s.contains("fp8_delayed")) {
      for (const nlohmann::json& v : s.at("fp8_delayed")) {
        const double x = v.get<double>();
        if (!std::isfinite(x) || x < 0) {
          return DataLoss(fmt::format("{}: fp8_delayed holds {}, not a finite value >= 0", path, x));
        }
        st.fp8_delayed.push_back(x);
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: malformed: {}", path, e.what()));
  }
  return st;
}

}  // namespace anvil::train
