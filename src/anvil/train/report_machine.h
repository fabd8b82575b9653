// machine.json: the machine a run trained on, written by the trainer when a
// session starts and shown by `anvil report`. Throughput and MFU figures mean
// little without the CPU, the SIMD tier and the peak they were divided by, and
// a run folder outlives the shell that printed them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::train {

// What only the trainer knows; the rest (CPU, features, version) is read here.
struct RunMachine {
  int threads = 0;              // the trainer's thread pool
  std::string isa;              // the SIMD tier the kernels dispatch to
  std::string precision;        // f32 / bf16: which peak the MFU divides by
  double peak_gflops = 0;       // the MFU denominator
  bool peak_measured = true;    // false: given by the caller (tests, bench)
  std::string peak_note = {};   // how it was measured, if not at startup alone
  std::string started_at = {};  // the session's start (UTC); empty: now
};

// The time now in UTC, strftime's `format` (by default as machine.json's
// started_at writes it: 2026-12-05T17:06:30Z).
std::string UtcNow(const char* format = "%Y-%m-%dT%H:%M:%SZ");

// Writes path atomically: cpu, cores, memory, features, tier, peak, anvil
// version and commit, host and time. A resume overwrites it, so it describes
// the machine of the latest session.
Status WriteMachineJson(const std::string& path, const RunMachine& run);

// machine.json as (label, value) rows in file order, for display. NotFound if
// the file is absent; InvalidArgument (naming the file) if it is not a JSON
// object.
Result<std::vector<std::pair<std::string, std::string>>> ReadMachineJson(const std::string& path);

}  // namespace anvil::train
