// `anvil report`: one self-contained HTML page of a run (or two overlaid).
// Parsing and printing only; the page is train::WriteReport.
#include <fmt/core.h>

#include <memory>

#include "anvil/commands.h"
#include "anvil/train/report.h"

namespace anvil::cli {

void AddReportCommand(CLI::App& app) {
  auto o = std::make_shared<train::ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write an HTML report of a run: loss, lr, grad norm, throughput, MFU, memory, config, machine");
  cmd->add_option("RUN_DIR", o->run_dir, "Run folder (holds metrics.jsonl)")->required();
  cmd->add_option("--compare", o->compare_dir, "A second run folder, overlaid on every plot");
  cmd->add_option("--out", o->out, "Page to write (default: RUN_DIR/report.html)");
  cmd->callback([o] {
    auto path = train::WriteReport(*o);
    if (!path.ok()) {
      fmt::print(stderr, "anvil report: {}\n", path.status().ToString());
      throw CLI::RuntimeError(1);
    }
    fmt::print("{}\n", *path);
  });
}

}  // namespace anvil::cli
