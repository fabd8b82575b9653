// `anvil env`: the machine — cores, caches, ISA — and its measured peaks.
#include <fmt/core.h>

#include "anvil/commands.h"
#include "anvil/core/cpu_features.h"
#include "anvil/core/thread_pool.h"
#include "anvil/profile/machine.h"
#include "anvil/profile/peak.h"

namespace anvil::cli {
namespace {

struct EnvOptions {
  bool skip_peaks = false;
  bool json = false;
};

std::string HumanBytes(long bytes) {
  if (bytes >= (1L << 30)) return fmt::format("{:.1f} GiB", bytes / double(1L << 30));
  if (bytes >= (1L << 20)) return fmt::format("{} MiB", bytes >> 20);
  return fmt::format("{} KiB", bytes >> 10);
}

int RunEnv(const EnvOptions& options) {
  const profile::MachineInfo m = profile::DescribeMachine();
  const int all = DefaultThreadCount();
  if (!options.json) {
    fmt::print("cpu        {}\n", m.cpu_model);
    fmt::print("cores      {} logical; anvil uses {} threads (ANVIL_THREADS)\n", m.logical_cpus, all);
    fmt::print("memory     {}\n", HumanBytes(m.memory_bytes));
    for (const profile::CacheInfo& c : m.caches) {
      fmt::print("cache      L{} {:<11} {:>8}{}\n", c.level, c.type, HumanBytes(c.size_bytes),
                 c.shared_by_cpus > 0 ? fmt::format("  shared by {} cpu(s)", c.shared_by_cpus)
                                      : std::string());
    }
    fmt::print("features   {}\n", GetCpuFeatures().ToString());
    fmt::print("dispatch   {}\n", IsaName(BestIsa()));
  }
  // The JSON object: the machine, then (unless skipped) its peaks.
  const std::string described = fmt::format("\"cpu\":\"{}\",\"threads\":{},\"isa\":\"{}\"",
                                            m.cpu_model, all, IsaName(BestIsa()));
  if (options.skip_peaks) {
    if (options.json) fmt::print("{{{}}}\n", described);
    return 0;
  }

  if (!options.json) fmt::print("measuring peaks (about 5 s)...\n");
  ThreadPool one(1);
  ThreadPool pool(all);
  const profile::PeakFlops p1 = profile::MeasurePeakFlops(one);
  const profile::PeakFlops pn = profile::MeasurePeakFlops(pool);
  const double bw = profile::MeasureReadBandwidth(pool);
  if (options.json) {
    fmt::print(
        "{{{},\"f32_fma_gflops_1t\":{:.1f},"
        "\"f32_fma_gflops\":{:.1f},\"bf16_dot_gflops_1t\":{:.1f},\"bf16_dot_gflops\":{:.1f},"
        "\"bf16_native\":{},\"amx_bf16_gflops_1t\":{:.1f},\"amx_bf16_gflops\":{:.1f},"
        "\"dram_read_gbs\":{:.1f}}}\n",
        described, p1.f32_gflops, pn.f32_gflops, p1.bf16_dot_gflops, pn.bf16_dot_gflops,
        pn.bf16_native, pn.amx ? p1.bf16_gflops : 0.0, pn.amx ? pn.bf16_gflops : 0.0, bw);
    return 0;
  }
  fmt::print("peak f32 FMA   {:8.1f} GFLOP/s on 1 thread, {:8.1f} on {} threads ({})\n",
             p1.f32_gflops, pn.f32_gflops, all, IsaName(pn.isa));
  fmt::print("peak bf16 dot  {:8.1f} GFLOP/s on 1 thread, {:8.1f} on {} threads ({})\n",
             p1.bf16_dot_gflops, pn.bf16_dot_gflops, all,
             pn.bf16_native ? "vdpbf16ps" : "no bf16 dot: f32 peak");
  if (pn.amx) {
    fmt::print(
        "peak bf16 AMX  {:8.1f} GFLOP/s on 1 thread, {:8.1f} on {} threads (tdpbf16ps: "
        "bf16 GEMMs run here; ANVIL_AMX=0 for vdpbf16ps)\n",
        p1.bf16_gflops, pn.bf16_gflops, all);
  }
  fmt::print("DRAM read      {:8.1f} GB/s on {} threads\n", bw, all);
  return 0;
}

}  // namespace

void AddEnvCommand(CLI::App& app) {
  auto options = std::make_shared<EnvOptions>();
  CLI::App* cmd = app.add_subcommand(
      "env", "Describe the machine and measure its peak FLOP/s and memory bandwidth");
  cmd->add_flag("--no-peaks", options->skip_peaks, "Only describe; skip the ~5 s measurement");
  cmd->add_flag("--json", options->json, "One JSON object instead of a table");
  cmd->callback([options] {
    const int rc = RunEnv(*options);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
