// anvil: the command-line entry point. Subcommands live in cmd_*.cc.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include "anvil/commands.h"
#include "anvil/core/cpu_features.h"
#include "anvil/core/environment.h"
#include "anvil/version.h"

namespace {

void PrintVersion() {
  fmt::print("anvil {} (commit {})\n", ANVIL_VERSION, ANVIL_GIT_COMMIT);
  fmt::print("cpu features: {}\n", anvil::GetCpuFeatures().ToString());
  fmt::print("dispatch: {}\n", anvil::IsaName(anvil::BestIsa()));
}

}  // namespace

int main(int argc, char** argv) {
  // Only what works today: model parallelism in the trainer is in progress.
  CLI::App app(
      "anvil: LLM training on CPUs (Llama; f32, bf16 and FP8 pre-training; data parallel over "
      "MPI; KV-cache generation, also W8A8/W4A8; SFT and exactly on-policy GRPO on tasks)",
      "anvil");
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print version, git commit and the CPU features detected");
  anvil::cli::AddEnvCommand(app);
  anvil::cli::AddBenchCommand(app);
  anvil::cli::AddPrepareCommand(app);
  anvil::cli::AddTrainCommand(app);
  anvil::cli::AddGenerateCommand(app);
  anvil::cli::AddEvalCommand(app);
  anvil::cli::AddReportCommand(app);
  anvil::cli::AddExportCommand(app);
  anvil::cli::AddProbeCommand(app);
  anvil::cli::AddSftCommand(app);
  anvil::cli::AddRlCommand(app);

  // Before parsing: the subcommands run inside CLI11_PARSE.
  if (const anvil::Status env = anvil::CheckEnvironment(); !env.ok()) {
    fmt::print(stderr, "anvil: {}\n", env.ToString());
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  if (version) {
    PrintVersion();
    return 0;
  }
  if (app.get_subcommands().empty()) {
    fmt::print("{}", app.help());
    return 1;
  }
  return 0;
}
