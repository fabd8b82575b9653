// `anvil generate`: sample text from a checkpoint, printing as it goes.
// Parsing and printing only; the work is infer::Generate.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>

#include "anvil/commands.h"
#include "anvil/infer/generate.h"

namespace anvil::cli {
namespace {

int RunGenerate(const infer::GenerateOptions& o) {
  // The prompt goes out with the first new text (or at the end), so a
  // request refused on its arguments or checkpoint leaves stdout empty.
  bool prompt_shown = false;
  const auto show_prompt = [&] {
    if (prompt_shown) return;
    std::fputs(o.prompt.c_str(), stdout);
    prompt_shown = true;
  };
  auto r = infer::Generate(
      o,
      [&](std::string_view piece) {
        show_prompt();
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      },
      [](const std::string& notice) { fmt::print(stderr, "\n[anvil generate: {}]\n", notice); });
  if (!r.ok()) {
    std::fflush(stdout);
    fmt::print(stderr, "\nanvil generate: {}\n", r.status().ToString());
    return 1;
  }
  show_prompt();
  std::string quant;
  if (o.quant != "none") {
    quant = fmt::format("; {} layer weights {:.1f} MiB, quantized in {:.2f} s", o.quant,
                        r->quant_weight_bytes / 1048576.0, r->quantize_seconds);
  }
  fmt::print(
      "\n\n[{}{}: {} prompt tokens in {:.3f} s; {} new tokens in {:.2f} s = "
      "{:.1f} tokens/s; stop: {}{}]\n",
      r->checkpoint, AtStep(r->step), r->prompt_tokens, r->prefill_seconds, r->new_tokens,
      r->decode_seconds, r->new_tokens / std::max(r->decode_seconds, 1e-9), r->stop_reason, quant);
  return 0;
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto o = std::make_shared<infer::GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate text from a checkpoint");
  cmd->add_option("--ckpt", o->checkpoint,
                  "Checkpoint folder, run folder (its latest checkpoint) or a `latest` file")
      ->required();
  cmd->add_option("--prompt", o->prompt, "Text to continue")->required();
  cmd->add_option("--max-new", o->max_new, "Most new tokens")->capture_default_str();
  cmd->add_option("--stop", o->stop,
                  "Stop once the text holds this string (repeatable; the text keeps it)");
  cmd->add_option("--temperature", o->sampling.temperature, "Softmax temperature")
      ->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "Sample among the k likeliest (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus: smallest set with this mass")
      ->capture_default_str();
  cmd->add_flag("--greedy", o->sampling.greedy, "Always the likeliest token");
  cmd->add_option("--seed", o->sampling.seed, "Sampling seed")->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads (0: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer.json (default: the run's data.dir)");
  cmd->add_option("--precision", o->precision, "f32, bf16, fp8-tensor, fp8-delayed, fp8-block or mxfp8")
      ->capture_default_str();
  cmd->add_option("--quant", o->quant,
                  "Linear layers in integers: none (f32), w8a8 (int8 weights per channel) or "
                  "w4a8 (int4 weights per group of 128); activations int8 per token")
      ->check(CLI::IsMember({"none", "w8a8", "w4a8"}))
      ->capture_default_str();
  cmd->callback([o] {
    if (const int rc = RunGenerate(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
