// The numerics probe (see probe.h).
#include "anvil/train/probe.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "anvil/core/file_util.h"

namespace anvil::train {

ProbeStats ComputeProbeStats(std::span<const float> x, bool fp8_underflow) {
  ProbeStats s;
  s.count = static_cast<int64_t>(x.size());
  double sum_sq = 0;
  int64_t finite = 0;
  for (const float v : x) {
    if (std::isnan(v)) {
      ++s.nan;
    } else if (std::isinf(v)) {
      ++s.inf;
    } else {
      const double a = std::fabs(static_cast<double>(v));
      s.max_abs = std::max(s.max_abs, a);
      sum_sq += a * a;
      ++finite;
    }
  }
  s.rms = finite > 0 ? std::sqrt(sum_sq / static_cast<double>(finite)) : 0.0;
  if (fp8_underflow) {
    // Scaled so max |x| lands on 448, a value rounds to zero up to half of
    // E4M3's smallest subnormal (2^-9; the tie goes to even, 0): |x| <= max |x| / 448 * 2^-10.
    const double threshold = s.max_abs / 448.0 * std::ldexp(1.0, -10);
    int64_t nonzero = 0, under = 0;
    for (const float v : x) {
      const double a = std::fabs(static_cast<double>(v));
      if (!std::isfinite(a) || a == 0) continue;
      ++nonzero;
      under += a <= threshold;
    }
    s.fp8_underflow = nonzero > 0 ? static_cast<double>(under) / static_cast<double>(nonzero) : 0.0;
  }
  return s;
}

ProbeWriter::~ProbeWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

Status ProbeWriter::Open(const std::string& path) {
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr) return IoError(fmt::format("{}: cannot write the probe record", path));
  return Status::Ok();
}

void ProbeWriter::Write(const ProbeRecord& r) {
  if (file_ == nullptr) return;
  nlohmann::ordered_json j;
  j["step"] = r.step;
  j["index"] = r.index;
  j["name"] = r.name;
  j["kind"] = r.kind;
  j["count"] = r.stats.count;
  j["max_abs"] = r.stats.max_abs;
  j["rms"] = r.stats.rms;
  j["nan"] = r.stats.nan;
  j["inf"] = r.stats.inf;
  if (r.stats.fp8_underflow >= 0) j["fp8_underflow"] = r.stats.fp8_underflow;
  std::fputs((j.dump() + "\n").c_str(), file_);
  std::fflush(file_);
}

Result<ProbeFault> ParseProbeFault(const std::string& text, int64_t n_layers) {
  const size_t eq = text.rfind('=');
  char* end = nullptr;
  const float factor = eq == std::string::npos ? 0.0f : std::strtof(text.c_str() + eq + 1, &end);
  if (eq == std::string::npos || eq == 0 || end == text.c_str() + eq + 1 || *end != '\0' ||
      factor == 0.0f || !std::isfinite(factor)) {
    return InvalidArgument(fmt::format(
        "--probe-fault \"{}\": expected NAME=FACTOR (e.g. layers.0.attn_out=1.01)", text));
  }
  const std::string name = text.substr(0, eq);
  // The names model::StepHooks::probe is called with (llama.cc).
  bool known = name == "embed" || name == "head.d_in";
  for (int64_t l = 0; l < n_layers && !known; ++l) {
    for (const char* site : {"attn_out", "mlp_out", "attn.d_in", "mlp.d_in"}) {
      known = known || name == fmt::format("layers.{}.{}", l, site);
    }
  }
  if (!known) {
    return InvalidArgument(fmt::format(
        "--probe-fault \"{}\": the probe sees no tensor {} (it sees embed, layers.L.attn_out, "
        "layers.L.mlp_out, layers.L.attn.d_in and layers.L.mlp.d_in for L < {}, and head.d_in)",
        text, name, n_layers));
  }
  return ProbeFault{.name = name, .factor = factor};
}

Result<std::vector<ProbeRecord>> ReadProbe(const std::string& run_dir) {
  const std::string path = run_dir + "/probe.jsonl";
  auto text = ReadFile(path);
  if (!text.ok()) {
    return NotFound(fmt::format("{}: no probe record (train the run with --probe)", path));
  }
  std::vector<ProbeRecord> records;
  std::istringstream in(*text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    try {
      const nlohmann::json j = nlohmann::json::parse(line);
      ProbeRecord r;
      r.step = j.at("step").get<int64_t>();
      r.index = j.at("index").get<int64_t>();
      r.name = j.at("name").get<std::string>();
      r.kind = j.at("kind").get<std::string>();
      r.stats.count = j.value("count", int64_t{-1});
      r.stats.max_abs = j.at("max_abs").get<double>();
      r.stats.rms = j.at("rms").get<double>();
      r.stats.nan = j.at("nan").get<int64_t>();
      r.stats.inf = j.at("inf").get<int64_t>();
      r.stats.fp8_underflow = j.value("fp8_underflow", -1.0);
      records.push_back(std::move(r));
    } catch (const std::exception& e) {
      return InvalidArgument(fmt::format("{}:{}: not a probe record ({})", path, line_no, e.what()));
    }
  }
  if (records.empty()) return InvalidArgument(fmt::format("{}: no records", path));
  return records;
}

double ProbeDistance(const ProbeRecord& a, const ProbeRecord& b) {
  if (a.name != b.name || a.stats.nan != b.stats.nan || a.stats.inf != b.stats.inf) {
    return std::numeric_limits<double>::infinity();
  }
  auto rel = [](double x, double y) {
    const double scale = std::max(std::fabs(x), std::fabs(y));
    return scale > 0 ? std::fabs(x - y) / scale : 0.0;
  };
  return std::max(rel(a.stats.rms, b.stats.rms), rel(a.stats.max_abs, b.stats.max_abs));
}

ProbeDiff DiffProbes(const std::vector<ProbeRecord>& a, const std::vector<ProbeRecord>& b,
                     double tolerance) {
  ProbeDiff d;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t na = a[i].stats.count, nb = b[i].stats.count;
    // Another tensor, or another size: the records are of different runs' shapes.
    const bool other =
        a[i].name != b[i].name || a[i].kind != b[i].kind || (na >= 0 && nb >= 0 && na != nb);
    const double dist = other ? std::numeric_limits<double>::infinity() : ProbeDistance(a[i], b[i]);
    d.distances.push_back(dist);
    ++d.compared;
    if (dist > tolerance) {
      d.first_divergence = static_cast<int64_t>(i);
      d.shapes_differ = other;
      break;
    }
  }
  return d;
}

}  // namespace anvil::train
