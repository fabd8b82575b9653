// `anvil bench train`: steady-state training throughput (tokens/s) and MFU of
// anvil's trainer on a run config, against an independent PyTorch Llama of
// the same config, dtype and thread count run in the same invocation
// (bench/torch_train_peer.py under /usr/bin/python3).
//
// With dp > 1: data parallel against one process, on the same global batch.
// The baseline is 1 rank x dp threads with the config's grad_accum; each case
// is dp ranks x 1 thread (grad_accum / dp micro-batches each) started through
// mpirun (this binary again, as a worker), for ZeRO 0 and 1 with the
// reduction overlapped and not, and ZeRO 2 and 3. Reported: tokens/s and the ratio to the
// baseline, the exposed-communication share of the step, and the model-state
// bytes per rank against the ZeRO formula.
#pragma once

#include <string>
#include <vector>

namespace anvil::bench {

struct TrainBenchOptions {
  std::string config;      // a run config: [model] and [train] (batch_size, seq_len, grad_accum)
  std::string precision;   // a train.precision value; empty: the config's (--dp: f32)
  int threads = 0;         // 0: ANVIL_THREADS or all cores
  int steps = 10;          // timed steps
  int warmup = 3;          // untimed steps first
  bool peer = true;        // also run the PyTorch peer
  bool json = false;       // one JSON object instead of a table
  std::string python = "/usr/bin/python3";
  std::string peer_script;  // default: torch_train_peer.py beside this file's source
  int dp = 1;               // > 1: the data-parallel comparison (no PyTorch peer)
  bool dp_worker = false;   // internal: one rank of a data-parallel case (under mpirun)
  std::vector<std::string> sets;  // --set key=value for the run config
};

int RunTrainBench(const TrainBenchOptions& options);

}  // namespace anvil::bench
