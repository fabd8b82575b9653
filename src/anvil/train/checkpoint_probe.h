// `anvil probe --ckpt`: the numerics probe on a saved checkpoint and batch —
// one forward and backward of the checkpoint's weights on a fixed batch, its
// records (the residual stream's activations and their grads in execution
// order, then every parameter's gradient and weight; probe.h) written to
// OUT/probe.jsonl. Two such records of one checkpoint and batch in two
// precisions (say bf16 and fp8-block) are compared by `anvil probe diff`,
// which names the first tensor where they part.
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/status.h"

namespace anvil::train {

struct CheckpointProbeOptions {
  std::string checkpoint;  // a checkpoint folder, a run folder or its `latest` file
  std::string out_dir;     // where probe.jsonl goes (created)
  std::string precision = "f32";
  // The batch: rows of T + 1 token ids cut from this file (ids separated by
  // white space), else the run's first validation windows (T = train.seq_len).
  std::string tokens_file;
  int64_t rows = 1;
  int64_t seq_len = 0;      // 0: the run's train.seq_len
  std::string fault;        // NAME=FACTOR: scale one activation (testing the diff)
  int threads = 0;
};

struct CheckpointProbeResult {
  std::string path;        // the probe.jsonl written
  int64_t records = 0;
  double loss = 0;         // the batch's mean loss
};

Result<CheckpointProbeResult> ProbeCheckpoint(const CheckpointProbeOptions& options);

}  // namespace anvil::train
