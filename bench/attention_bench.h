// `anvil bench attention`: FlashAttention forward and forward+backward against
// a naive T x T reference in the same run, with GFLOP/s and peak memory.
#pragma once

#include <vector>

namespace anvil::bench {

struct AttentionBenchOptions {
  std::vector<long> seq_lens;   // empty: 256, 1024, 4096 (+16384 forward only)
  int batch = 1;
  int heads = 12;
  int kv_heads = 12;
  int head_dim = 64;
  bool causal = true;
  bool bf16 = false;            // bf16 inputs (f32 math); default f32
  bool fused_qkv =
      false;  // q, k, v (and dq, dk, dv) as one row-major buffer, as the model keeps them
  int threads = 0;              // 0: all (ANVIL_THREADS)
  bool naive = true;            // also run the naive reference (skipped where it won't fit)
  bool backward = true;         // also time fwd+bwd (default lengths: up to 4096 only)
  bool json = false;
  double min_seconds = 0.3;
};

int RunAttentionBench(const AttentionBenchOptions& options);

}  // namespace anvil::bench
