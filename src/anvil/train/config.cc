// TrainConfig: reading the "train.*" and "data.*" keys, validation.
#include "anvil/train/config.h"

#include <fmt/core.h>

namespace anvil::train {

Result<TrainConfig> TrainConfig::FromConfig(Config& config) {
  TrainConfig c;
  ASSIGN_OR_RETURN(c.data_dir, config.GetString("data.dir", c.data_dir));
  ASSIGN_OR_RETURN(const std::string mode, config.GetString("data.mode", "windows"));
  if (mode == "windows") {
    c.mode = data::BatchMode::kWindows;
  } else if (mode == "packed") {
    c.mode = data::BatchMode::kPacked;
  } else {
    return InvalidArgument(fmt::format("key data.mode = \"{}\": must be \"windows\" or \"packed\"", mode));
  }
  ASSIGN_OR_RETURN(c.shuffle, config.GetBool("data.shuffle", c.shuffle));
  ASSIGN_OR_RETURN(c.steps, config.GetInt("train.steps", c.steps));
  ASSIGN_OR_RETURN(c.batch_size, config.GetInt("train.batch_size", c.batch_size));
  ASSIGN_OR_RETURN(c.seq_len, config.GetInt("train.seq_len", c.seq_len));
  ASSIGN_OR_RETURN(c.grad_accum, config.GetInt("train.grad_accum", c.grad_accum));
  ASSIGN_OR_RETURN(c.seed, config.GetInt("train.seed", c.seed));
  ASSIGN_OR_RETURN(const std::string precision, config.GetString("train.precision", "auto"));
  if (precision == "auto") {
    c.precision_auto = true;  // the trainer decides from the measured peaks
  } else {
    auto p = model::ParsePrecision(precision);
    if (!p.ok()) {
      return p.status().WithContext(
          "key train.precision (f32, bf16, fp8-tensor, fp8-delayed, fp8-block, mxfp8 or auto)");
    }
    c.precision = *p;
  }
  ASSIGN_OR_RETURN(const std::string recompute, config.GetString("train.recompute", "none"));
  auto r = model::ParseRecompute(recompute);
  if (!r.ok()) return r.status().WithContext("key train.recompute");
  c.recompute = *r;
  ASSIGN_OR_RETURN(c.threads, config.GetInt("train.threads", c.threads));
  ASSIGN_OR_RETURN(c.eval_every, config.GetInt("train.eval_every", c.eval_every));
  ASSIGN_OR_RETURN(c.eval_batches, config.GetInt("train.eval_batches", c.eval_batches));
  ASSIGN_OR_RETURN(c.checkpoint_every, config.GetInt("train.checkpoint_every", c.checkpoint_every));
  ASSIGN_OR_RETURN(c.keep_checkpoints, config.GetInt("train.keep_checkpoints", c.keep_checkpoints));
  ASSIGN_OR_RETURN(c.log_every, config.GetInt("train.log_every", c.log_every));
  ASSIGN_OR_RETURN(c.max_minutes, config.GetDouble("train.max_minutes", c.max_minutes));
  ASSIGN_OR_RETURN(c.time_budget_minutes,
                   config.GetDouble("train.time_budget_minutes", c.time_budget_minutes));
  ASSIGN_OR_RETURN(c.time_budget_refit,
                   config.GetBool("train.time_budget_refit", c.time_budget_refit));
  ASSIGN_OR_RETURN(c.trace_steps, config.GetInt("train.trace_steps", c.trace_steps));
  ASSIGN_OR_RETURN(c.probe_steps, config.GetInt("train.probe_steps", c.probe_steps));
  ASSIGN_OR_RETURN(const std::string fp8_decode, config.GetString("train.fp8_decode", "auto"));
  if (fp8_decode != "auto" && fp8_decode != "bf16" && fp8_decode != "f32") {
    return InvalidArgument(fmt::format(
        "key train.fp8_decode = \"{}\": expected \"auto\", \"bf16\" or \"f32\"", fp8_decode));
  }
  c.fp8_decode_auto = fp8_decode == "auto";
  c.fp8_decode = fp8_decode == "bf16" ? kernels::Fp8Decode::kBf16 : kernels::Fp8Decode::kF32;
  ASSIGN_OR_RETURN(const std::string kept, config.GetString("train.fp8_high_precision", "auto"));
  if (kept != "auto" && kept != "bf16" && kept != "f32") {
    return InvalidArgument(fmt::format(
        "key train.fp8_high_precision = \"{}\": expected \"auto\", \"bf16\" or \"f32\"", kept));
  }
  c.fp8_high_precision_auto = kept == "auto";
  c.fp8_high_precision_bf16 = kept == "bf16";
  ASSIGN_OR_RETURN(c.fp8_high_precision_layers,
                   config.GetInt("train.fp8_high_precision_layers", c.fp8_high_precision_layers));
  if (c.fp8_high_precision_layers < 0) {
    return InvalidArgument("key train.fp8_high_precision_layers must be >= 0");
  }
  ASSIGN_OR_RETURN(const std::string on_nonfinite, config.GetString("train.on_nonfinite", "skip"));
  if (on_nonfinite != "skip" && on_nonfinite != "stop") {
    return InvalidArgument(fmt::format(
        "key train.on_nonfinite = \"{}\": expected \"skip\" or \"stop\"", on_nonfinite));
  }
  c.stop_on_nonfinite = on_nonfinite == "stop";
  ASSIGN_OR_RETURN(const std::string grad_format,
                   config.GetString("train.fp8_grad_format", "e4m3"));
  if (grad_format == "e5m2") {
    c.fp8_grad_format = kernels::Fp8Format::kE5M2;
  } else if (grad_format != "e4m3") {
    return InvalidArgument(fmt::format(
        "key train.fp8_grad_format = \"{}\": expected \"e4m3\" or \"e5m2\"", grad_format));
  }
  ASSIGN_OR_RETURN(c.fp8_amax_history,
                   config.GetInt("train.fp8_amax_history", c.fp8_amax_history));
  if (c.fp8_amax_history < 1 || c.fp8_amax_history > 4096) {
    return InvalidArgument(fmt::format("key train.fp8_amax_history = {}: expected 1..4096",
                                       c.fp8_amax_history));
  }
  ASSIGN_OR_RETURN(const std::string reduction,
                   config.GetString("train.fp8_amax_reduction", "max"));
  if (reduction != "max" && reduction != "most_recent") {
    return InvalidArgument(fmt::format(
        "key train.fp8_amax_reduction = \"{}\": expected \"max\" or \"most_recent\"", reduction));
  }
  c.fp8_amax_most_recent = reduction == "most_recent";
  ASSIGN_OR_RETURN(const std::string mx_scale, config.GetString("train.fp8_mx_scale", "ocp"));
  if (mx_scale != "ocp" && mx_scale != "round_up") {
    return InvalidArgument(
        fmt::format("key train.fp8_mx_scale = \"{}\": expected \"ocp\" or \"round_up\"", mx_scale));
  }
  c.fp8_mx_round_up = mx_scale == "round_up";
  RETURN_IF_ERROR(c.Validate());
  return c;
}

model::Precision AutoPrecision(const profile::PeakFlops& peak) {
  return peak.bf16_native && peak.bf16_gflops > profile::kBf16ChoiceRatio * peak.f32_gflops
             ? model::Precision::kBF16
             : model::Precision::kF32;
}

Status TrainConfig::Validate() const {
  auto bad = [](const char* key, int64_t v, const char* want) {
    return InvalidArgument(fmt::format("key {} = {}: {}", key, v, want));
  };
  if (data_dir.empty()) return InvalidArgument("key data.dir: must name the prepared data folder");
  if (steps < 1) return bad("train.steps", steps, "must be >= 1");
  if (batch_size < 1) return bad("train.batch_size", batch_size, "must be >= 1");
  if (seq_len < 1) return bad("train.seq_len", seq_len, "must be >= 1");
  if (grad_accum < 1) return bad("train.grad_accum", grad_accum, "must be >= 1");
  if (batch_size > (1 << 24) / seq_len) {
    return InvalidArgument(fmt::format(
        "train.batch_size x train.seq_len = {} x {}: a micro-batch holds at most 2^24 tokens "
        "(use train.grad_accum for larger steps)",
        batch_size, seq_len));
  }
  if (seed < 0) return bad("train.seed", seed, "must be >= 0");
  if (threads < 0 || threads > 1024) return bad("train.threads", threads, "must be in [0, 1024] (0: all)");
  if (eval_every < 0) return bad("train.eval_every", eval_every, "must be >= 0 (0: at the end only)");
  if (eval_batches < 1) return bad("train.eval_batches", eval_batches, "must be >= 1");
  if (checkpoint_every < 0) {
    return bad("train.checkpoint_every", checkpoint_every, "must be >= 0 (0: at the end only)");
  }
  if (keep_checkpoints < 0) return bad("train.keep_checkpoints", keep_checkpoints, "must be >= 0");
  if (log_every < 1) return bad("train.log_every", log_every, "must be >= 1");
  if (!(max_minutes >= 0)) {
    return InvalidArgument(fmt::format("key train.max_minutes = {}: must be >= 0", max_minutes));
  }
  if (!(time_budget_minutes >= 0)) {
    return InvalidArgument(
        fmt::format("key train.time_budget_minutes = {}: must be >= 0", time_budget_minutes));
  }
  if (trace_steps < 1) return bad("train.trace_steps", trace_steps, "must be >= 1");
  return Status::Ok();
}

}  // namespace anvil::train
