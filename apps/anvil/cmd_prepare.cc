// `anvil prepare`: corpus -> BPE tokenizer -> token shards. Parsing and
// printing only; the pipeline is data::Prepare (src/anvil/data/prepare.h).
#include <fmt/core.h>

#include <cstdio>
#include <memory>

#include "anvil/commands.h"
#include "anvil/data/prepare.h"

namespace anvil::cli {
namespace {

void PrintSummary(const data::PrepareSummary& s) {
  auto split = [](const data::SplitSummary& x) {
    return fmt::format("{:>5} documents {:>10.2f} MB {:>10} tokens", x.documents, x.bytes / 1e6,
                       x.tokens);
  };
  fmt::print("\nsummary\n");
  fmt::print("  corpus        {} ({})\n", s.corpus, s.corpus_root);
  fmt::print("  train         {}\n", split(s.train));
  fmt::print("  validation    {}\n", split(s.val));
  fmt::print("  vocabulary    {} tokens ({} merges), trained in {:.2f} s\n", s.vocab_size, s.merges,
             s.tokenizer_seconds);
  fmt::print("  compression   {:.3f} bytes/token (train text, bos/eos excluded)\n",
             s.bytes_per_token);
  fmt::print(
      "  val baseline  unigram entropy {:.4f} nats/token, {:.4f} bits/byte "
      "({:.3f} bytes/token with bos/eos)\n",
      s.val_unigram_entropy_nats, s.val_unigram_bits_per_byte, s.val_bytes_per_token);
  fmt::print("  encode        {:.1f} MB/s\n", s.encode_mb_per_s);
  fmt::print("  wrote         {}/{{tokenizer.json,train.bin,val.bin,meta.json}}\n", s.out_dir);
  fmt::print("  time          {:.2f} s\n", s.seconds);
}

int RunPrepare(const data::PrepareOptions& options) {
  fmt::print("anvil prepare: corpus {}, vocab {}, validation fraction {}, seed {}, out {}\n",
             options.corpus, options.vocab_size, options.val_fraction, options.seed,
             options.out_dir);
  auto result =
      data::Prepare(options, [](std::string_view stage, std::string_view detail, double elapsed) {
        fmt::print("[{:7.2f} s] {:<10} {}\n", elapsed, stage, detail);
        std::fflush(stdout);
      });
  if (!result.ok()) {
    fmt::print(stderr, "anvil prepare: {}\n", result.status().message());
    return 1;
  }
  PrintSummary(*result);
  return 0;
}

}  // namespace

void AddPrepareCommand(CLI::App& app) {
  auto options = std::make_shared<data::PrepareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "prepare", "Train a byte-level BPE tokenizer on a corpus and write token shards");
  cmd->add_option("--corpus", options->corpus,
                  "\"brown\" (the Brown corpus from scripts/setup.sh), a text file, or a folder "
                  "of text files (one document each)")
      ->required();
  cmd->add_option("--out", options->out_dir,
                  "Output folder: tokenizer.json, train.bin, val.bin, meta.json")
      ->required();
  cmd->add_option("--vocab", options->vocab_size,
                  "Vocabulary size, 256 bytes and 3 special tokens included")
      ->capture_default_str();
  cmd->add_option("--val-fraction", options->val_fraction,
                  "Fraction of documents held out for validation (at least one)")
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of the train/validation split")
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "Threads (0: ANVIL_THREADS or all cores)")
      ->check(ThreadsRange())
      ->capture_default_str();
  cmd->callback([options] {
    const int rc = RunPrepare(*options);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
