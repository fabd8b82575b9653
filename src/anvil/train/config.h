// The trainer's settings: "train.*" (the step loop, evaluation, checkpoints)
// and "data.*" (where the token shards are and how batches are cut), read from
// a run Config with defaults and validated once.
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/data/loader.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/quant.h"
#include "anvil/model/config.h"
#include "anvil/profile/peak.h"

namespace anvil::train {

struct TrainConfig {
  // data.*
  std::string data_dir = "data/brown";  // train.bin, val.bin, tokenizer.json, meta.json
  data::BatchMode mode = data::BatchMode::kWindows;  // data.mode: "windows" | "packed"
  bool shuffle = true;                                // data.shuffle

  // train.*
  int64_t steps = 1000;         // optimizer steps of the whole run
  int64_t batch_size = 8;       // B: rows per micro-batch
  int64_t seq_len = 256;        // T
  int64_t grad_accum = 1;       // micro-batches per step
  int64_t seed = 1234;          // weight init and data order
  // train.precision: "f32", "bf16", "fp8-tensor", "fp8-delayed", "fp8-block", "mxfp8" or "auto"
  // (precision_auto: the trainer sets `precision` from AutoPrecision, f32 or
  // bf16, and the resolved config records the choice, so a resume keeps it).
  model::Precision precision = model::Precision::kF32;
  bool precision_auto = false;
  // train.fp8_grad_format: "e4m3" (DeepSeek-V3) or "e5m2" for the output
  // gradients of the FP8 precisions.
  kernels::Fp8Format fp8_grad_format = kernels::Fp8Format::kE4M3;
  // train.fp8_decode: the dot product FP8 values are decoded to, "bf16",
  // "f32" or "auto" (fp8_decode_auto: the trainer picks the faster from the
  // measured peaks and records the choice in the resolved config, so a resume
  // keeps it: the two give different bits).
  kernels::Fp8Decode fp8_decode = kernels::Fp8Decode::kF32;
  bool fp8_decode_auto = true;
  // train.fp8_high_precision_layers: with an FP8 precision, the first and the
  // last this many layers keep their GEMMs out of FP8, as the LM head does.
  int64_t fp8_high_precision_layers = 0;
  // train.fp8_high_precision: the format of the GEMMs kept out of FP8, "bf16",
  // "f32" or "auto" (fp8_high_precision_auto: bf16 where the machine's bf16
  // GEMMs outrun f32, AutoPrecision's rule; recorded in the resolved config).
  bool fp8_high_precision_bf16 = false;
  bool fp8_high_precision_auto = true;
  const char* fp8_high_precision_name() const { return fp8_high_precision_bf16 ? "bf16" : "f32"; }
  // fp8-delayed: train.fp8_amax_history steps of amax per tensor, reduced by
  // train.fp8_amax_reduction "max" or "most_recent" (fp8_delayed_scaling.h).
  int64_t fp8_amax_history = 16;
  bool fp8_amax_most_recent = false;
  // mxfp8: train.fp8_mx_scale, the E8M0 block scale rule, "ocp" (the MX
  // spec's floor, quant.h kMxOcp) or "round_up" (NVIDIA's, kMxRoundUp).
  bool fp8_mx_round_up = false;
  // train.on_nonfinite: what a step whose gradient holds an infinity or a NaN
  // does: "skip" (the optimizer step is skipped, the run goes on) or "stop"
  // (the run ends with an error). Either way the tensor is named.
  bool stop_on_nonfinite = false;
  model::Recompute recompute = model::Recompute::kNone;
  int64_t threads = 0;          // 0: ANVIL_THREADS or all cores
  int64_t eval_every = 100;     // validation every N steps (and at the end); 0: end only
  int64_t eval_batches = 8;     // validation batches (the first ones, in order)
  int64_t checkpoint_every = 0;  // 0: at the end only
  int64_t keep_checkpoints = 3;  // newest N kept; 0 keeps all
  int64_t log_every = 10;        // plain progress lines when not on a terminal
  double max_minutes = 0;        // stop (eval + checkpoint) after this wall time; 0: none
  // Fit the schedule into this wall time: train.steps is lowered (never
  // raised) from steps timed early in the warmup (time_budget.h); 0: off.
  // max_minutes stays a hard stop behind it.
  double time_budget_minutes = 0;
  // Check that fit again every tenth of the run from the wall time since
  // (BudgetRefit): the step count follows a machine whose speed drifts. Off:
  // one fit, and the run is bitwise the one configured with its steps.
  bool time_budget_refit = true;
  int64_t trace_steps = 3;       // steps traced with --trace (after the first)
  int64_t probe_steps = 2;       // steps recorded with --probe (from the run's first)

  // Reads the keys (absent ones keep the defaults above) and validates.
  static Result<TrainConfig> FromConfig(Config& config);
  Status Validate() const;

  int64_t tokens_per_step() const { return batch_size * seq_len * grad_accum; }
};

// train.precision = "auto": bf16 where the CPU's bf16 GEMMs are clearly
// faster than its f32 FMA (measured: vdpbf16ps 2x on Zen 5, but half on some
// Xeons that have AVX512_BF16, and AMX tiles 4x there), f32 elsewhere (AVX2
// has no bf16 dot: bf16 operands only add conversions). bf16 must win by
// 25%: it also rounds every GEMM input.
model::Precision AutoPrecision(const profile::PeakFlops& peak);


}  // namespace anvil::train
