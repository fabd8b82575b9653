// For tests: a policy small enough to train and sample in milliseconds.
#pragma once

#include <utility>

#include "anvil/core/status.h"
#include "anvil/data/bpe_train.h"
#include "anvil/rl/policy.h"

namespace anvil::rl::testing {

// Two layers of width 32 (two query heads, one key/value head), byte-level
// tokens, a 16-token context; seed 3, one thread, up to 8 sequences a draw.
inline Result<Policy> NewMicroPolicy() {
  model::ModelConfig cfg;
  cfg.dim = 32;
  cfg.n_layers = 2;
  cfg.n_heads = 2;
  cfg.n_kv_heads = 1;
  cfg.ffn_dim = 64;
  cfg.vocab_size = 259;
  cfg.max_seq_len = 16;
  auto tokenizer = data::ByteTokenizer();
  RETURN_IF_ERROR(tokenizer.status());
  return NewPolicy(cfg, std::move(*tokenizer), 3, {.max_batch = 8, .threads = 1});
}

}  // namespace anvil::rl::testing
