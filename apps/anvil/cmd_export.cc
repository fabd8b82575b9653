// `anvil export`: a checkpoint as one Hugging Face Llama folder. Parsing and
// printing only; the work is train::ExportCheckpoint.
#include <fmt/core.h>

#include <memory>

#include "anvil/commands.h"
#include "anvil/train/export.h"

namespace anvil::cli {

void AddExportCommand(CLI::App& app) {
  auto o = std::make_shared<train::ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a checkpoint (any parallel layout) as one Hugging Face Llama folder");
  cmd->add_option("--ckpt", o->checkpoint, "Run folder (its latest checkpoint) or checkpoint folder")
      ->required();
  cmd->add_option("--out", o->out, "Output folder: model.safetensors, config.json, tokenizer.json")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer.json (default: the run's data.dir)");
  cmd->callback([o] {
    auto r = train::ExportCheckpoint(*o);
    if (!r.ok()) {
      fmt::print(stderr, "anvil export: {}\n", r.status().ToString());
      throw CLI::RuntimeError(1);
    }
    fmt::print("exported {} (step {}, {:.2f} M parameters) to {}\n", r->checkpoint_dir, r->step,
               r->parameters / 1e6, o->out);
  });
}

}  // namespace anvil::cli
