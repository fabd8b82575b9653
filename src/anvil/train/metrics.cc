// metrics.jsonl writing and the process memory high-water mark.
#include "anvil/train/metrics.h"

#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "anvil/core/file_util.h"

namespace anvil::train {

int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream in(line.substr(6));
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

Result<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(const std::string& path,
                                                           int64_t keep_through_step) {
  if (keep_through_step >= 0) {
    auto text = ReadFile(path);
    if (text.ok()) {
      std::string kept;
      std::istringstream in(*text);
      std::string line;
      while (std::getline(in, line)) {
        if (line.empty()) continue;
        int64_t step = -1;
        try {
          step = nlohmann::json::parse(line).value("step", int64_t{-1});
        } catch (const nlohmann::json::exception&) {
          continue;  // a line torn by a crash
        }
        if (step <= keep_through_step) kept += line + "\n";
      }
      RETURN_IF_ERROR(WriteFileAtomic(path, kept));
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return IoError(fmt::format("{}: cannot open for appending: {}", path, std::strerror(errno)));
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(f));
}

MetricsWriter::~MetricsWriter() { std::fclose(file_); }

void MetricsWriter::Write(const StepMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = m.loss;
  j["lr"] = m.lr;
  j["grad_norm"] = m.grad_norm;
  j["tokens_per_s"] = m.tokens_per_s;
  if (!std::isnan(m.mfu)) j["mfu"] = m.mfu;
  j["mem_high_water"] = m.mem_high_water;
  j["tokens"] = m.tokens;
  j["step_seconds"] = m.seconds;
  if (m.exposed_comm_s >= 0) j["exposed_comm_seconds"] = m.exposed_comm_s;
  if (!m.nonfinite_tensor.empty()) {
    j["skipped"] = true;
    j["nonfinite_grad"] = m.nonfinite_tensor;
  }
  WriteJsonLine(j.dump());
}

void MetricsWriter::Write(const EvalMetrics& m) {
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["val_loss"] = m.val_loss;
  j["val_tokens"] = m.val_tokens;
  j["eval_seconds"] = m.seconds;
  WriteJsonLine(j.dump());
}

void MetricsWriter::WriteJsonLine(const std::string& object) {
  std::fputs((object + "\n").c_str(), file_);
  std::fflush(file_);
}

}  // namespace anvil::train
