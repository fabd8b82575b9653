// The numerics probe (`anvil train --probe`, `anvil probe diff`): per-tensor
// statistics of the first train.probe_steps steps, in execution order — the
// residual stream's activations as the forward makes them, their grads as the
// backward makes them, then every parameter's gradient and its weights after
// the update — written to probe.jsonl in the run folder by rank 0. Two such
// records (say a bf16 and an FP8 run from one seed) are compared entry by
// entry, and the first tensor where they part beyond a tolerance is named,
// with the distances along the way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::train {

struct ProbeStats {
  int64_t count = -1;  // values in the tensor; -1: a record from before counts
  double max_abs = 0;
  double rms = 0;
  int64_t nan = 0;
  int64_t inf = 0;
  // Share of the non-zero values that E4M3, scaled so the tensor's max |x|
  // is its largest value (448), would round to zero; -1 when not asked for.
  double fp8_underflow = -1;
};

// The statistics of x (f32 sums in double, in index order).
ProbeStats ComputeProbeStats(std::span<const float> x, bool fp8_underflow);

struct ProbeRecord {
  int64_t step = 0;
  int64_t index = 0;   // position in the step's execution order
  std::string name;    // "layers.1.attn_out", "layers.1.wqkv", ...
  std::string kind;    // activation, activation_grad, param_grad, weight
  ProbeStats stats;
};

// probe.jsonl, one record a line (flushed as written).
class ProbeWriter {
 public:
  ProbeWriter() = default;
  ProbeWriter(const ProbeWriter&) = delete;
  ProbeWriter& operator=(const ProbeWriter&) = delete;
  ~ProbeWriter();
  Status Open(const std::string& path);
  void Write(const ProbeRecord& r);

 private:
  std::FILE* file_ = nullptr;
};

// A fault planted for the probe to find (--probe-fault NAME=FACTOR, a test
// of the probe itself): one tensor the probe sees (an activation of the
// residual stream or its gradient) scaled by a finite, non-zero factor.
struct ProbeFault {
  std::string name;  // a name the model's probe calls (model::StepHooks::probe)
  float factor = 1;
};
// Parses NAME=FACTOR; NAME must be one the probe calls for a model of
// `n_layers` layers (an unknown one would silently plant nothing).
Result<ProbeFault> ParseProbeFault(const std::string& text, int64_t n_layers);

// The records of RUN_DIR/probe.jsonl, in file order; errors name the line.
Result<std::vector<ProbeRecord>> ReadProbe(const std::string& run_dir);

// The distance of two entries: the larger relative difference of rms and of
// max |x| (|a - b| / max(|a|, |b|)); infinite where the NaN or Inf counts
// differ or the names do.
double ProbeDistance(const ProbeRecord& a, const ProbeRecord& b);

struct ProbeDiff {
  int64_t compared = 0;         // entries walked (both records, in order)
  int64_t first_divergence = -1;  // its position among them, -1: none beyond the tolerance
  // The entries at first_divergence are of other tensors, or hold different
  // counts of values: the two records are of another model, batch or
  // sequence length, not comparable.
  bool shapes_differ = false;
  std::vector<double> distances;  // per entry walked
};
ProbeDiff DiffProbes(const std::vector<ProbeRecord>& a, const std::vector<ProbeRecord>& b,
                     double tolerance);

}  // namespace anvil::train
