// Checkpoint evaluation through the decoder (evaluate.h).
#include "anvil/infer/evaluate.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/data/loader.h"
#include "anvil/data/shard.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/model/decode.h"
#include "anvil/model/int_linear.h"

namespace anvil::infer {

Result<EvalResult> EvaluateCheckpoint(const EvalOptions& options,
                                      const std::function<void(int64_t, int64_t)>& on_progress) {
  if (options.windows < 1) return InvalidArgument("--windows must be >= 1");
  if (options.seq_len < 0) return InvalidArgument("--seq-len must be >= 0");
  ASSIGN_OR_RETURN(const model::Precision precision, model::ParsePrecision(options.precision));
  ASSIGN_OR_RETURN(const model::WeightQuant quant, model::ParseWeightQuant(options.quant));
  if (quant != model::WeightQuant::kNone && precision != model::Precision::kF32) {
    return InvalidArgument(fmt::format("--quant {} quantizes the f32 weights: use --precision f32",
                                       options.quant));
  }
  ASSIGN_OR_RETURN(CheckpointModel m,
                   LoadInferenceModel(options.checkpoint, precision, options.threads));
  if (m.info.step < 0 && options.seq_len == 0 && options.data_dir.empty()) {
    return InvalidArgument(fmt::format(
        "{}: an export carries no run config; pass --seq-len and --data", m.info.dir));
  }
  ASSIGN_OR_RETURN(const int64_t t, RunSeqLen(m, options.seq_len));
  ASSIGN_OR_RETURN(const data::TokenShard shard,
                   OpenValidationShard(m, options.data_dir, "--data"));
  data::LoaderConfig lc{.batch_size = 1, .seq_len = static_cast<int>(t), .shuffle = false};
  ASSIGN_OR_RETURN(data::Loader loader, data::Loader::Create(shard, lc));
  const int64_t windows =
      std::min<int64_t>(options.windows, static_cast<int64_t>(loader.steps_per_epoch()));

  const kernels::KernelCtx& ctx = *m.ctx;
  std::unique_ptr<model::IntLinear> linear;
  if (quant != model::WeightQuant::kNone) {
    linear = std::make_unique<model::IntLinear>(m.forward_weights(), quant, t, ctx);
  }
  model::Decoder decoder(m.forward_weights(), 1, t, t, linear.get());
  const int64_t v = m.config.vocab_size;
  std::vector<float> logits(static_cast<size_t>(t * v));
  data::Batch batch;
  double nll = 0;
  Stopwatch watch;
  for (int64_t w = 0; w < windows; ++w) {
    loader.Fill({0, static_cast<uint64_t>(w)}, &batch);
    decoder.Reset();
    decoder.Append(ctx, 0, batch.Inputs(0), logits.data());
    const std::span<const int32_t> targets = batch.Targets(0);
    for (int64_t i = 0; i < t; ++i) {
      const float* row = logits.data() + i * v;
      const double max = *std::max_element(row, row + v);
      double sum = 0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - max);
      nll += max + std::log(sum) - row[targets[i]];
    }
    if (on_progress) on_progress(w + 1, windows);
  }
  EvalResult r;
  r.seconds = watch.Seconds();
  r.checkpoint = m.info.dir;
  r.step = m.info.step;
  r.precision = model::PrecisionName(precision);
  r.quant = model::WeightQuantName(quant);
  r.windows = windows;
  r.tokens = windows * t;
  r.loss = nll / static_cast<double>(r.tokens);
  r.perplexity = std::exp(r.loss);
  r.note = DelayedScalingNote(m, precision);
  if (options.windows > windows) {  // asked for more than the shard holds
    r.note += fmt::format(
        "{}--windows {}: the validation shard holds {} windows of {} tokens; all "
        "of them were evaluated",
        r.note.empty() ? "" : "; ", options.windows, windows, t);
  }
  return r;
}

}  // namespace anvil::infer
