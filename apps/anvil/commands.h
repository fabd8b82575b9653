// Subcommand registration: each cmd_*.cc adds one subcommand to the app.
#pragma once

#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace anvil::cli {

// The values --threads takes: 0 (ANVIL_THREADS, else every core) up to the
// limit ANVIL_THREADS has.
inline CLI::Range ThreadsRange() { return CLI::Range(0, 1024); }

// A path given as "" is a mistake (an unset shell variable), not a request
// for the default.
inline CLI::Validator NonEmptyPath() {
  return CLI::Validator(
      [](std::string& value) {
        return value.empty() ? std::string("an empty path") : std::string();
      },
      "PATH");
}

// Where a loaded model comes from: " at step N" of a checkpoint, or
// " (an export)" (infer::OpenModelFolder's step -1).
inline std::string AtStep(int64_t step) {
  return step < 0 ? std::string(" (an export)") : fmt::format(" at step {}", step);
}

void AddEnvCommand(CLI::App& app);
void AddBenchCommand(CLI::App& app);
void AddBenchGemm(CLI::App& bench);
void AddBenchAttention(CLI::App& bench);
void AddBenchTrain(CLI::App& bench);
void AddBenchRollout(CLI::App& bench);
void AddPrepareCommand(CLI::App& app);
void AddTrainCommand(CLI::App& app);
void AddGenerateCommand(CLI::App& app);
void AddEvalCommand(CLI::App& app);
void AddReportCommand(CLI::App& app);
void AddExportCommand(CLI::App& app);
void AddProbeCommand(CLI::App& app);
void AddSftCommand(CLI::App& app);
void AddRlCommand(CLI::App& app);

}  // namespace anvil::cli
