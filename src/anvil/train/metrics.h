// Per-step and validation metrics, and their metrics.jsonl writer: one JSON
// object per line, flushed as written, so a crashed run keeps every line
// before the crash.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "anvil/core/status.h"

namespace anvil::train {

struct StepMetrics {
  int64_t step = 0;        // steps done, this one included (1-based)
  double loss = 0;         // mean over the step's counted targets
  double lr = 0;
  double grad_norm = 0;    // global L2 norm before clipping
  double tokens_per_s = 0;
  double mfu = 0;              // model FLOPs / s over the measured peak; NaN: not measured
  int64_t mem_high_water = 0;  // process peak resident bytes
  int64_t tokens = 0;      // training tokens seen so far
  double seconds = 0;      // this step's wall time
  // Data parallel: seconds the step waited for gradient reductions and the
  // weight gather after its backward (communication not hidden); -1: one process.
  double exposed_comm_s = -1;
  // Set when the step's gradient was not finite (an overflow or a NaN): the
  // first tensor, in backward order, holding a non-finite gradient. The
  // optimizer step was skipped (train.on_nonfinite).
  std::string nonfinite_tensor{};
};

struct EvalMetrics {
  int64_t step = 0;
  double val_loss = 0;
  int64_t val_tokens = 0;
  double seconds = 0;
};

// The process's peak resident set (VmHWM) in bytes; 0 where unknown.
int64_t PeakRssBytes();

class MetricsWriter {
 public:
  // Opens path for appending. With `keep_through_step` >= 0 (a resume), lines
  // of later steps are dropped first, so the file continues seamlessly.
  static Result<std::unique_ptr<MetricsWriter>> Open(const std::string& path,
                                                     int64_t keep_through_step);
  ~MetricsWriter();
  void Write(const StepMetrics& m);
  void Write(const EvalMetrics& m);
  // Any other record: one JSON object (with a "step"), without its newline.
  void WriteJsonLine(const std::string& object);

 private:
  explicit MetricsWriter(std::FILE* file) : file_(file) {}
  std::FILE* file_;
};

}  // namespace anvil::train
