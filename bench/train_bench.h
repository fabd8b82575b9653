// `anvil bench train`: steady-state training throughput (tokens/s) and MFU of
// anvil's trainer on a run config, against an independent PyTorch Llama of
// the same config, dtype and thread count run in the same invocation
// (bench/torch_train_peer.py under /usr/bin/python3).
#pragma once

#include <string>

namespace anvil::bench {

struct TrainBenchOptions {
  std::string config;      // a run config: [model] and [train] (batch_size, seq_len, grad_accum)
  std::string precision;   // "f32" | "bf16"; empty: the config's train.precision
  int threads = 0;         // 0: ANVIL_THREADS or all cores
  int steps = 10;          // timed steps
  int warmup = 3;          // untimed steps first
  bool peer = true;        // also run the PyTorch peer
  bool json = false;       // one JSON object instead of a table
  std::string python = "/usr/bin/python3";
  std::string peer_script;  // default: torch_train_peer.py beside this file's source
};

int RunTrainBench(const TrainBenchOptions& options);

}  // namespace anvil::bench
