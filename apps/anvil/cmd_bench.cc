// `anvil bench`: the kernel benchmarks; each family registers a subcommand.
#include "anvil/commands.h"

namespace anvil::cli {

void AddBenchCommand(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure kernel throughput against peers");
  bench->require_subcommand(1);
#ifdef ANVIL_HAVE_BENCH_GEMM
  AddBenchGemm(*bench);
#endif
#ifdef ANVIL_HAVE_BENCH_ATTENTION
  AddBenchAttention(*bench);
#endif
}

}  // namespace anvil::cli
