// Training a byte-level BPE vocabulary from documents. Deterministic for any
// thread count: words are counted per thread and merged in sorted order, and
// the merge picked each round is the most frequent pair, ties going to the
// lexicographically smallest (left bytes, right bytes) compared as unsigned
// bytes. Pair counts are updated incrementally (pair -> words index and a
// max-heap with lazy invalidation); nothing is recounted per merge.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "anvil/core/status.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/tokenizer.h"

namespace anvil::data {

struct BpeTrainOptions {
  // Tokens in all: 256 bytes + the distinct special tokens + learned tokens.
  int vocab_size = 8192;
  SpecialTokens specials;
  // Training stops early (a smaller vocabulary) when the best pair occurs
  // fewer times than this: a pair seen once compresses nothing.
  int64_t min_pair_count = 2;

  Status Validate() const;
};

struct BpeTrainStats {
  int64_t pretokens = 0;     // pre-tokens in the corpus
  int64_t unique_words = 0;  // distinct pre-tokens
  int64_t merges = 0;
  double count_seconds = 0;  // pre-tokenizing and counting
  double merge_seconds = 0;
};

// Ids: bytes 0..255 (id == byte), then bos, eos, pad (256.. in that order; a
// name given twice shares one id), then learned tokens in merge order. A merge
// whose result is already a token reuses its id (as Hugging Face's trainer
// does); a merge whose result would spell a special name is skipped.
Result<Tokenizer> TrainBpe(std::span<const std::string_view> documents,
                           const BpeTrainOptions& options, ThreadPool& pool,
                           BpeTrainStats* stats = nullptr);

// The vocabulary with no merges: the 256 bytes, then bos, eos, pad (ids as
// TrainBpe numbers them). For tasks where every character is a decision, such
// as the digits of arithmetic (rl/tasks.h), merged number tokens would hide
// the structure a small model has to learn.
Result<Tokenizer> ByteTokenizer(const SpecialTokens& specials = {});

}  // namespace anvil::data
