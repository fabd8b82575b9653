// `anvil eval`: validation loss and perplexity of a checkpoint, in a chosen
// precision or with quantized linear layers. Parsing and printing only; the
// work is infer::EvaluateCheckpoint.
#include <fmt/core.h>

#include <cstdio>
#include <memory>

#include "anvil/commands.h"
#include "anvil/infer/evaluate.h"

namespace anvil::cli {
namespace {

int RunEval(const infer::EvalOptions& o, bool json) {
  auto r = infer::EvaluateCheckpoint(o, [json](int64_t done, int64_t total) {
    if (!json) fmt::print(stderr, "\r[eval] window {}/{}", done, total);
  });
  if (!json) fmt::print(stderr, "\n");
  if (!r.ok()) {
    fmt::print(stderr, "anvil eval: {}\n", r.status().ToString());
    return 1;
  }
  if (!r->note.empty()) fmt::print(stderr, "[anvil eval: {}]\n", r->note);
  if (json) {
    fmt::print(
        "{{\"checkpoint\":\"{}\",\"step\":{},\"precision\":\"{}\",\"quant\":\"{}\","
        "\"windows\":{},\"tokens\":{},\"loss\":{:.6f},\"perplexity\":{:.4f},"
        "\"tokens_per_s\":{:.1f}}}\n",
        r->checkpoint, r->step < 0 ? "null" : std::to_string(r->step), r->precision, r->quant,
        r->windows, r->tokens, r->loss, r->perplexity, r->tokens / std::max(r->seconds, 1e-9));
  } else {
    fmt::print(
        "{}{}: precision {}, quant {}: validation loss {:.4f} (perplexity "
        "{:.3f}) over {} windows, {} tokens; {:.0f} tokens/s\n",
        r->checkpoint, AtStep(r->step), r->precision, r->quant, r->loss, r->perplexity, r->windows,
        r->tokens, r->tokens / std::max(r->seconds, 1e-9));
  }
  return 0;
}

}  // namespace

void AddEvalCommand(CLI::App& app) {
  auto o = std::make_shared<infer::EvalOptions>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "eval", "Validation loss and perplexity of a checkpoint (any precision, or W8A8/W4A8)");
  cmd->add_option("--ckpt", o->checkpoint,
                  "Checkpoint folder, run folder (its latest checkpoint) or a `latest` file")
      ->required();
  cmd->add_option("--precision", o->precision, "f32, bf16, fp8-tensor, fp8-delayed, fp8-block or mxfp8")
      ->capture_default_str();
  cmd->add_option("--quant", o->quant, "Linear layers in integers: none, w8a8 or w4a8")
      ->check(CLI::IsMember({"none", "w8a8", "w4a8"}))
      ->capture_default_str();
  cmd->add_option("--windows", o->windows, "Validation windows (the first ones, in order)")
      ->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len, "Tokens per window (0: the run's train.seq_len)")
      ->capture_default_str();
  cmd->add_option("--data", o->data_dir, "Folder with val.bin (default: the run's data.dir)");
  cmd->add_option("--threads", o->threads, "Threads (0: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  cmd->add_flag("--json", *json, "One JSON object");
  cmd->callback([o, json] {
    if (const int rc = RunEval(*o, *json); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
