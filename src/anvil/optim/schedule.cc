// OptimConfig parsing/validation and the warmup + cosine LR schedule.
#include "anvil/optim/schedule.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace anvil::optim {

Result<OptimConfig> OptimConfig::FromConfig(Config& config) {
  OptimConfig c;
  ASSIGN_OR_RETURN(c.lr, config.GetDouble("optim.lr", c.lr));
  ASSIGN_OR_RETURN(c.min_lr_ratio, config.GetDouble("optim.min_lr_ratio", c.min_lr_ratio));
  ASSIGN_OR_RETURN(c.warmup_steps, config.GetInt("optim.warmup_steps", c.warmup_steps));
  ASSIGN_OR_RETURN(c.decay_steps, config.GetInt("optim.decay_steps", c.decay_steps));
  ASSIGN_OR_RETURN(c.beta1, config.GetDouble("optim.beta1", c.beta1));
  ASSIGN_OR_RETURN(c.beta2, config.GetDouble("optim.beta2", c.beta2));
  ASSIGN_OR_RETURN(c.eps, config.GetDouble("optim.eps", c.eps));
  ASSIGN_OR_RETURN(c.weight_decay, config.GetDouble("optim.weight_decay", c.weight_decay));
  ASSIGN_OR_RETURN(c.grad_clip, config.GetDouble("optim.grad_clip", c.grad_clip));
  RETURN_IF_ERROR(c.Validate());
  return c;
}

Status OptimConfig::Validate() const {
  auto bad = [](const char* key, double v, const char* want) {
    return InvalidArgument(fmt::format("key optim.{} = {}: {}", key, v, want));
  };
  if (!(lr > 0 && std::isfinite(lr))) return bad("lr", lr, "must be positive and finite");
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1)) {
    return bad("min_lr_ratio", min_lr_ratio, "must be in [0, 1]");
  }
  if (warmup_steps < 0) return bad("warmup_steps", warmup_steps, "must be >= 0");
  if (decay_steps < 0) return bad("decay_steps", decay_steps, "must be >= 0 (0: train.steps)");
  if (!(beta1 >= 0 && beta1 < 1)) return bad("beta1", beta1, "must be in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) return bad("beta2", beta2, "must be in [0, 1)");
  if (!(eps > 0)) return bad("eps", eps, "must be positive");
  if (!(weight_decay >= 0 && lr * weight_decay < 1)) {
    return bad("weight_decay", weight_decay, "must be >= 0 with lr * weight_decay < 1");
  }
  if (!(grad_clip >= 0)) return bad("grad_clip", grad_clip, "must be >= 0 (0: no clipping)");
  return Status::Ok();
}

LrSchedule::LrSchedule(const OptimConfig& config, int64_t total_steps)
    : lr_(config.lr),
      lr_min_(config.lr * config.min_lr_ratio),
      warmup_(config.warmup_steps),
      decay_(config.decay_steps > 0 ? config.decay_steps : total_steps) {}

double LrSchedule::LrAt(int64_t step) const {
  if (step < warmup_) return lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup_);
  if (step >= decay_) return lr_min_;
  const double progress =
      static_cast<double>(step - warmup_) / static_cast<double>(std::max<int64_t>(1, decay_ - warmup_));
  return lr_min_ + (lr_ - lr_min_) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace anvil::optim
