// Post-training run settings (run_config.h).
#include "anvil/rl/run_config.h"

#include <fmt/core.h>

#include <utility>

namespace anvil::rl {

Result<PostRunConfig> PostRunConfig::FromConfig(Config& config, const std::string& section) {
  PostRunConfig c;
  const std::string p = section + ".";
  ASSIGN_OR_RETURN(c.init, config.GetString(p + "init", c.init));
  ASSIGN_OR_RETURN(c.steps, config.GetInt(p + "steps", c.steps));
  ASSIGN_OR_RETURN(c.seed, config.GetInt(p + "seed", c.seed));
  ASSIGN_OR_RETURN(const std::string precision, config.GetString(p + "precision", "f32"));
  ASSIGN_OR_RETURN(c.precision, model::ParsePrecision(precision));
  ASSIGN_OR_RETURN(c.eval_every, config.GetInt(p + "eval_every", c.eval_every));
  ASSIGN_OR_RETURN(c.eval_problems, config.GetInt(p + "eval_problems", c.eval_problems));
  ASSIGN_OR_RETURN(c.eval_batch, config.GetInt(p + "eval_batch", c.eval_batch));
  ASSIGN_OR_RETURN(c.max_new, config.GetInt(p + "max_new", c.max_new));
  ASSIGN_OR_RETURN(c.log_every, config.GetInt(p + "log_every", c.log_every));
  ASSIGN_OR_RETURN(c.checkpoint_every, config.GetInt(p + "checkpoint_every", c.checkpoint_every));
  ASSIGN_OR_RETURN(c.keep_checkpoints, config.GetInt(p + "keep_checkpoints", c.keep_checkpoints));
  ASSIGN_OR_RETURN(c.threads, config.GetInt(p + "threads", c.threads));
  ASSIGN_OR_RETURN(c.max_minutes, config.GetDouble(p + "max_minutes", c.max_minutes));
  ASSIGN_OR_RETURN(c.zero, config.GetInt(p + "zero", c.zero));
  if (c.precision == model::Precision::kFp8Tensor) {
    return InvalidArgument(fmt::format(
        "{}precision = \"{}\": post-training runs in f32, bf16, fp8-block, mxfp8 or fp8-delayed "
        "(FP8 recipes whose scales do not depend on the batch, so rollouts and the trainer agree "
        "bit for bit)",
        p, precision));
  }
  auto positive = [&](const char* key, int64_t v) -> Status {
    if (v < 1) return InvalidArgument(fmt::format("{}{} = {}: expected >= 1", p, key, v));
    return Status::Ok();
  };
  RETURN_IF_ERROR(positive("steps", c.steps));
  RETURN_IF_ERROR(positive("eval_problems", c.eval_problems));
  RETURN_IF_ERROR(positive("eval_batch", c.eval_batch));
  RETURN_IF_ERROR(positive("max_new", c.max_new));
  RETURN_IF_ERROR(positive("log_every", c.log_every));
  for (const auto& [key, v] : {std::pair<const char*, double>{"seed", c.seed},
                               {"eval_every", c.eval_every},
                               {"checkpoint_every", c.checkpoint_every},
                               {"keep_checkpoints", c.keep_checkpoints},
                               {"max_minutes", c.max_minutes}}) {
    if (!(v >= 0)) return InvalidArgument(fmt::format("{}{} = {}: expected >= 0", p, key, v));
  }
  if (c.threads < 0 || c.threads > 1024) {
    return InvalidArgument(
        fmt::format("{}threads = {}: expected 0 (ANVIL_THREADS or all) .. 1024", p, c.threads));
  }
  if (c.zero < 0 || c.zero > 2) {
    return InvalidArgument(fmt::format(
        "{}zero = {}: post-training runs ZeRO-0 (every trainer rank holds AdamW's whole state), "
        "ZeRO-1 (each holds its shard) or ZeRO-2 (and its shard of the gradient); ZeRO-3, which "
        "shards the weights too, is `anvil train`'s: the rollouts read the weights whole",
        p, c.zero));
  }
  ASSIGN_OR_RETURN(c.task, TaskConfig::FromConfig(config));
  if (const int64_t n = c.task.SplitSize(Split::kHeldOut); n > 0 && c.eval_problems > n) {
    return InvalidArgument(
        fmt::format("{}eval_problems = {}: task.data holds {} held-out pairs (task.held_out); set "
                    "{}eval_problems = {} or hold out more",
                    p, c.eval_problems, n, p, n));
  }
  ASSIGN_OR_RETURN(c.optim, optim::OptimConfig::FromConfig(config));
  return c;
}

}  // namespace anvil::rl
