// `anvil prepare`: corpus -> BPE tokenizer -> token shards, as a library call
// (the CLI only parses and prints). Writes OUT/tokenizer.json, OUT/train.bin,
// OUT/val.bin and, last, OUT/meta.json, each atomically. Deterministic: the
// same corpus, options and seed give the same bytes for any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/data/tokenizer.h"

namespace anvil::data {

struct PrepareOptions {
  std::string corpus;  // "brown", a text file, or a folder of text files
  std::string out_dir;
  int vocab_size = 8192;
  double val_fraction = 0.02;  // of the documents; at least one goes to validation
  uint64_t seed = 1234;
  int threads = 0;  // 0: DefaultThreadCount()
  SpecialTokens specials;

  Status Validate() const;
};

struct SplitSummary {
  int64_t documents = 0;
  int64_t bytes = 0;   // text bytes
  int64_t tokens = 0;  // bos and eos included
};

struct PrepareSummary {
  std::string corpus;  // "brown" or the path given
  std::string corpus_root;
  std::string out_dir;
  int vocab_size = 0;  // of the trained tokenizer (can fall short of the request)
  int64_t merges = 0;
  SplitSummary train, val;
  double bytes_per_token = 0;      // train text bytes / train text tokens (no bos/eos)
  double val_bytes_per_token = 0;  // val text bytes / val tokens (bos/eos included)
  double val_unigram_entropy_nats = 0;
  double val_unigram_bits_per_byte = 0;
  double tokenizer_seconds = 0;
  double encode_mb_per_s = 0;
  double seconds = 0;
};

// Called at each stage with a one-line account and the seconds since start.
using PrepareProgress =
    std::function<void(std::string_view stage, std::string_view detail, double elapsed_s)>;

Result<PrepareSummary> Prepare(const PrepareOptions& options, const PrepareProgress& progress = {});

// The validation documents: document i is in validation when
// SplitMix64(seed ^ SplitMix64(i)) < fraction * 2^64; if that picks none, the
// document with the smallest hash does. Needs num_docs >= 2 and a fraction in
// (0, 0.5], so training keeps at least one document.
std::vector<bool> ValidationDocuments(size_t num_docs, double fraction, uint64_t seed);

// Shannon entropy (nats) of the distribution given by occurrence counts.
double UnigramEntropy(const std::vector<int64_t>& counts);

}  // namespace anvil::data
