// The numerics probe on a checkpoint and a saved batch (checkpoint_probe.h).
#include "anvil/train/checkpoint_probe.h"

#include <fmt/core.h>

#include <sstream>
#include <vector>

#include "anvil/core/file_util.h"
#include "anvil/data/loader.h"
#include "anvil/data/shard.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/train/probe.h"

namespace anvil::train {
namespace {

// rows x (T + 1) ids: from the file, or the run's first validation windows.
Result<std::vector<int32_t>> BatchTokens(const CheckpointProbeOptions& o,
                                         const infer::CheckpointModel& m, int64_t t) {
  const int64_t vocab = m.config.vocab_size;
  const size_t want = static_cast<size_t>(o.rows * (t + 1));
  std::vector<int32_t> ids;
  if (!o.tokens_file.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadFile(o.tokens_file));
    std::istringstream in(text);
    long long id;
    while (ids.size() < want && in >> id) {
      if (id < 0 || id >= vocab) {
        return InvalidArgument(fmt::format("{}: token id {} is not in [0, {})", o.tokens_file, id,
                                           vocab));
      }
      ids.push_back(static_cast<int32_t>(id));
    }
    if (!in && !in.eof()) {
      return InvalidArgument(fmt::format("{}: expected token ids separated by white space",
                                         o.tokens_file));
    }
    if (ids.size() < want) {
      return InvalidArgument(fmt::format("{}: {} token ids, {} rows of {} need {}", o.tokens_file,
                                         ids.size(), o.rows, t + 1, want));
    }
    return ids;
  }
  ASSIGN_OR_RETURN(const data::TokenShard shard, infer::OpenValidationShard(m, "", "--tokens"));
  data::LoaderConfig lc{.batch_size = static_cast<int>(o.rows), .seq_len = static_cast<int>(t),
                        .shuffle = false};
  ASSIGN_OR_RETURN(data::Loader loader, data::Loader::Create(shard, lc));
  data::Batch batch;
  loader.Fill({0, 0}, &batch);
  return batch.tokens;
}

}  // namespace

Result<CheckpointProbeResult> ProbeCheckpoint(const CheckpointProbeOptions& o) {
  if (o.rows < 1) return InvalidArgument("--rows must be >= 1");
  if (o.seq_len < 0) return InvalidArgument("--seq-len must be >= 0");
  if (o.out_dir.empty()) return InvalidArgument("--out is required");
  ASSIGN_OR_RETURN(const model::Precision precision, model::ParsePrecision(o.precision));
  ASSIGN_OR_RETURN(infer::CheckpointModel m,
                   infer::LoadCheckpointModel(o.checkpoint, precision, o.threads, o.rows));
  ProbeFault fault;  // none: no name matches
  if (!o.fault.empty()) {
    ASSIGN_OR_RETURN(fault, ParseProbeFault(o.fault, m.config.n_layers));
  }
  ASSIGN_OR_RETURN(const int64_t t, infer::RunSeqLen(m, o.seq_len));
  ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                   BatchTokens(o, m, t));
  std::vector<int32_t> tokens, targets;
  for (int64_t r = 0; r < o.rows; ++r) {
    const int32_t* row = ids.data() + r * (t + 1);
    tokens.insert(tokens.end(), row, row + t);
    targets.insert(targets.end(), row + 1, row + t + 1);
  }
  const model::Batch batch{.rows = o.rows, .seq_len = t, .tokens = tokens, .targets = targets};

  RETURN_IF_ERROR(MakeDirectories(o.out_dir));
  CheckpointProbeResult result;
  result.path = o.out_dir + "/probe.jsonl";
  ProbeWriter writer;
  RETURN_IF_ERROR(writer.Open(result.path));
  const bool fp8 = model::IsFp8(precision);
  const int64_t step = std::max<int64_t>(m.info.step, 0);  // an export's: unknown, 0
  int64_t index = 0;
  model::StepHooks hooks;
  hooks.probe = [&](const std::string& name, float* x, int64_t n) {
    if (name == fault.name) {
      for (int64_t i = 0; i < n; ++i) x[i] *= fault.factor;
    }
    const bool grad = name.size() > 5 && name.compare(name.size() - 5, 5, ".d_in") == 0;
    writer.Write({.step = step, .index = index++, .name = name,
                  .kind = grad ? "activation_grad" : "activation",
                  .stats = ComputeProbeStats({x, static_cast<size_t>(n)}, fp8)});
  };
  model::Llama& llama = *m.llama;
  llama.ZeroGrads(*m.ctx);
  const model::LossStats loss = llama.ForwardBackward(*m.ctx, batch, 0.0f, hooks);
  result.loss = loss.mean();
  model::LlamaParams& params = llama.params();
  for (const model::ParamInfo& p : params.params()) {
    writer.Write({.step = step, .index = index++, .name = p.name, .kind = "param_grad",
                  .stats = ComputeProbeStats(params.grads().subspan(p.offset, p.numel), fp8)});
  }
  for (const model::ParamInfo& p : params.params()) {
    writer.Write({.step = step, .index = index++, .name = p.name, .kind = "weight",
                  .stats = ComputeProbeStats(params.weights().subspan(p.offset, p.numel), fp8)});
  }
  result.records = index;
  return result;
}

}  // namespace anvil::train
