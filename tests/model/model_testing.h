// Shared helpers of the model tests: micro configs and deterministic batches
// (fixed windows or packed documents with per-document positions).
#pragma once

#include <cstdint>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/model/config.h"
#include "anvil/model/head_block.h"
#include "anvil/model/llama.h"

namespace anvil::model::testing {

// dim 64 = 4 heads x 16 (the attention tile), 2 kv heads, 2 layers.
inline ModelConfig MicroConfig(bool tied = false) {
  ModelConfig c;
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 48;
  c.vocab_size = 64;
  c.max_seq_len = 64;
  c.tie_embeddings = tied;
  return c;
}

// Owns the arrays a Batch points into.
struct TestBatch {
  std::vector<int32_t> tokens, targets, cu_seqlens, positions;
  Batch batch;
};

// B rows of T random tokens with next-token targets. Packed: documents of
// lengths 1..T cut from the flattened rows (crossing row boundaries), positions
// restarting per document, each document's last target ignored. Fixed windows:
// the last target of each row ignored.
inline TestBatch MakeBatch(int64_t rows, int64_t seq_len, int64_t vocab, uint64_t seed, bool packed) {
  TestBatch t;
  const int64_t n = rows * seq_len;
  const RngStream rng(seed, RngPurpose::kTest);
  for (int64_t i = 0; i < n; ++i) t.tokens.push_back(static_cast<int32_t>(rng.U32(i) % vocab));
  t.targets.assign(n, kIgnoreIndex);
  if (packed) {
    t.cu_seqlens.push_back(0);
    int64_t j = 0;
    while (t.cu_seqlens.back() < n) {
      const int64_t len = 1 + rng.U32(1000000 + j++) % seq_len;
      t.cu_seqlens.push_back(static_cast<int32_t>(std::min<int64_t>(n, t.cu_seqlens.back() + len)));
    }
    for (size_t d = 0; d + 1 < t.cu_seqlens.size(); ++d) {
      for (int32_t i = t.cu_seqlens[d]; i < t.cu_seqlens[d + 1]; ++i) {
        t.positions.push_back(i - t.cu_seqlens[d]);
        if (i + 1 < t.cu_seqlens[d + 1]) t.targets[i] = t.tokens[i + 1];
      }
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if ((i + 1) % seq_len != 0) t.targets[i] = t.tokens[i + 1];
    }
  }
  t.batch = Batch{.rows = rows, .seq_len = seq_len, .tokens = t.tokens, .targets = t.targets,
                  .cu_seqlens = t.cu_seqlens, .positions = t.positions};
  return t;
}

}  // namespace anvil::model::testing
