// Optimizer settings ("optim.*" keys) and the learning-rate schedule: linear
// warmup, then cosine decay to lr * min_lr_ratio. The LR is a pure function of
// the step, so a resumed run needs only the step to continue the schedule.
#pragma once

#include <cstdint>

#include "anvil/core/config.h"
#include "anvil/core/status.h"

namespace anvil::optim {

struct OptimConfig {
  double lr = 3e-4;            // peak learning rate
  double min_lr_ratio = 0.1;   // the cosine ends at lr * min_lr_ratio
  int64_t warmup_steps = 100;  // linear ramp to lr over the first steps
  int64_t decay_steps = 0;     // cosine length incl. warmup; 0: train.steps
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;  // on matrices only (see adamw.h for the rule)
  double grad_clip = 1.0;     // max global grad L2 norm; 0 disables clipping

  // Reads the "optim.*" keys (absent keys keep the defaults above); validates.
  static Result<OptimConfig> FromConfig(Config& config);
  // What is wrong, naming the key and the valid range.
  Status Validate() const;
};

class LrSchedule {
 public:
  // `total_steps`: the cosine's end when config.decay_steps is 0.
  LrSchedule(const OptimConfig& config, int64_t total_steps);

  // The LR of the update at 0-based step s:
  //   s < W:          lr * (s + 1) / W
  //   W <= s < D:     lr_min + (lr - lr_min) * (1 + cos(pi * (s - W) / (D - W))) / 2
  //   s >= D:         lr_min                       (lr_min = lr * min_lr_ratio)
  double LrAt(int64_t step) const;

 private:
  double lr_, lr_min_;
  int64_t warmup_, decay_;
};

}  // namespace anvil::optim
