// `anvil bench attention`: FlashAttention vs a naive reference.
#include <memory>

#include "anvil/commands.h"
#include "attention_bench.h"

namespace anvil::cli {

void AddBenchAttention(CLI::App& bench) {
  auto options = std::make_shared<bench::AttentionBenchOptions>();
  CLI::App* cmd =
      bench.add_subcommand("attention", "FlashAttention fwd / fwd+bwd vs a naive reference");
  cmd->add_option("--seq", options->seq_lens, "Sequence lengths (repeatable)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--batch", options->batch, "Batch size")->check(CLI::PositiveNumber);
  cmd->add_option("--heads", options->heads, "Query heads")->check(CLI::PositiveNumber);
  cmd->add_option("--kv-heads", options->kv_heads, "Key/value heads (divides --heads)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--head-dim", options->head_dim, "Head dimension")->check(CLI::PositiveNumber);
  cmd->add_flag("!--full", options->causal, "Full (non-causal) mask");
  cmd->add_flag("--bf16", options->bf16, "bf16 inputs (f32 math)");
  cmd->add_flag("--fused-qkv", options->fused_qkv,
                "q, k and v in one [tokens, (heads + 2 kv_heads) x head_dim] buffer, as the model "
                "keeps them (their gradients too); default: three dense tensors");
  cmd->add_option("--threads", options->threads, "Threads (default: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  cmd->add_flag("!--no-naive", options->naive, "Skip the naive T x T reference");
  cmd->add_flag("!--no-bwd", options->backward, "Time the forward only");
  cmd->add_flag("--json", options->json, "One JSON object per line");
  cmd->add_option("--min-seconds", options->min_seconds, "Minimum timing per case")
      ->check(CLI::PositiveNumber);
  cmd->callback([options] {
    if (options->heads % options->kv_heads != 0) {
      throw CLI::ValidationError("--kv-heads", "must divide --heads");
    }
    if (const int rc = bench::RunAttentionBench(*options); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
