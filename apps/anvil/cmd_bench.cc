// `anvil bench`: the kernel benchmarks; each family registers a subcommand.
#include "anvil/commands.h"

namespace anvil::cli {

void AddBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure kernel throughput against peers");
  bench->require_subcommand(1);
  AddBenchGemm(*bench);
  AddBenchAttention(*bench);
  AddBenchTrain(*bench);
  AddBenchRollout(*bench);
}

}  // namespace anvil::cli
