// Loading a checkpoint's model for inference (checkpoint_model.h).
#include "anvil/infer/checkpoint_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "anvil/core/config.h"
#include "anvil/core/file_util.h"
#include "anvil/kernels/attention.h"
#include "anvil/model/attention_block.h"
#include "anvil/model/checkpoint_weights.h"
#include "anvil/model/hf_checkpoint.h"

namespace anvil::infer {

Result<model::ForwardOptions> Fp8SettingsOf(Config& run, model::ForwardOptions o) {
  // A string setting: "auto" (an unresolved setting of a run that was not
  // FP8) keeps what `o` has.
  const auto choice = [&run](const std::string& key, const char* a, const char* b,
                             bool is_b) -> Result<bool> {
    ASSIGN_OR_RETURN(const std::string v, run.GetString(key, is_b ? b : a));
    if (v == "auto") return is_b;
    if (v != a && v != b) {
      return InvalidArgument(fmt::format("{} = \"{}\": expected \"{}\" or \"{}\"", key, v, a, b));
    }
    return v == b;
  };
  ASSIGN_OR_RETURN(const bool e5m2, choice("train.fp8_grad_format", "e4m3", "e5m2",
                                           o.fp8.grad == kernels::Fp8Format::kE5M2));
  o.fp8.grad = e5m2 ? kernels::Fp8Format::kE5M2 : kernels::Fp8Format::kE4M3;
  ASSIGN_OR_RETURN(const bool decode_bf16, choice("train.fp8_decode", "f32", "bf16",
                                                  o.fp8.decode == kernels::Fp8Decode::kBf16));
  o.fp8.decode = decode_bf16 ? kernels::Fp8Decode::kBf16 : kernels::Fp8Decode::kF32;
  // A run from before the key existed kept its LM head and layers in f32.
  ASSIGN_OR_RETURN(o.fp8.high_precision_bf16,
                   choice("train.fp8_high_precision", "f32", "bf16", o.fp8.high_precision_bf16));
  ASSIGN_OR_RETURN(const int64_t keep,
                   run.GetInt("train.fp8_high_precision_layers", o.fp8_high_precision_layers));
  if (keep < 0 || keep > 1024) {
    return InvalidArgument(
        fmt::format("train.fp8_high_precision_layers = {}: expected 0..1024", keep));
  }
  o.fp8_high_precision_layers = static_cast<int>(keep);
  ASSIGN_OR_RETURN(const int64_t history, run.GetInt("train.fp8_amax_history", o.fp8.amax_history));
  if (history < 1 || history > 4096) {
    return InvalidArgument(fmt::format("train.fp8_amax_history = {}: expected 1..4096", history));
  }
  o.fp8.amax_history = static_cast<int>(history);
  ASSIGN_OR_RETURN(o.fp8.amax_most_recent, choice("train.fp8_amax_reduction", "max", "most_recent",
                                                  o.fp8.amax_most_recent));
  ASSIGN_OR_RETURN(const bool round_up, choice("train.fp8_mx_scale", "ocp", "round_up",
                                               o.fp8.mx_rule == kernels::BlockScale::kMxRoundUp));
  o.fp8.mx_rule = round_up ? kernels::BlockScale::kMxRoundUp : kernels::BlockScale::kMxOcp;
  return o;
}

Status RestoreDelayedScales(const std::string& dir, model::Fp8DelayedScaling* delayed) {
  // `anvil train`'s state, else a post-training run's.
  std::string path = dir + "/trainer_state.json";
  if (!std::filesystem::exists(path)) path = dir + "/state.json";
  auto text = ReadFile(path);
  if (!text.ok()) return Status::Ok();  // no run state (a bare checkpoint)
  std::vector<double> state;
  try {
    const nlohmann::json j = nlohmann::json::parse(*text);
    if (!j.contains("fp8_delayed")) return Status::Ok();
    for (const nlohmann::json& v : j.at("fp8_delayed")) state.push_back(v.get<double>());
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("{}: malformed: {}", path, e.what()));
  }
  if (!delayed->Restore(state)) {
    return DataLoss(fmt::format(
        "{}: fp8_delayed ({} values) does not fit this model's delayed scaling ({} tensors with "
        "train.fp8_amax_history = {}: {} values); set the run's own history length",
        path, state.size(), delayed->tensors(), delayed->history_len(),
        static_cast<int64_t>(delayed->tensors()) * (3 + delayed->history_len())));
  }
  return Status::Ok();
}

namespace {

// Weights of more than this (in bf16, the smaller form) stream from DRAM at
// each decode step: the L3 of one CCD of the Zen parts these hosts are (the
// VM reports far more than a core sees). Measured, old and new in turn: the
// small model (63 MB) in bf16 at batch 8 +50%, at batch 1 +13%; tiny (14
// MB), treated so, lost 10% at batch 1.
constexpr int64_t kCachedWeightBytes = int64_t{32} << 20;

}  // namespace

Result<io::CheckpointInfo> OpenModelFolder(const std::string& path, io::CheckpointRead read) {
  Result<io::CheckpointInfo> info = io::OpenCheckpoint(path, read);
  std::string dir = path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  if (info.ok() || std::filesystem::exists(dir + "/" + io::kManifestFile, ec) ||
      !std::filesystem::exists(dir + "/config.json", ec) ||
      !std::filesystem::exists(dir + "/model.safetensors", ec)) {
    return info;
  }
  return io::CheckpointInfo{.dir = dir, .step = -1};
}

std::unique_ptr<kernels::KernelCtx> MakeModelCtx(ThreadPool& pool,
                                                 const model::ModelConfig& config) {
  const size_t scratch = std::max(kernels::KernelCtx::kDefaultScratchBytes,
                                  kernels::AttentionScratchBytes(model::AttentionDimsOf(config)));
  auto ctx = std::make_unique<kernels::KernelCtx>(pool, BestIsa(), scratch);
  ctx->set_weights_outgrow_caches(config.NumParams() * int64_t{sizeof(BF16)} > kCachedWeightBytes);
  return ctx;
}

namespace {

// The folder, its config.json, threads and kernel context, and the options
// of `precision` (an FP8 recipe's from the run's config.toml).
Result<CheckpointModel> Open(const std::string& checkpoint, model::Precision precision, int threads,
                             Config* run_fp8, model::ForwardOptions* options,
                             io::CheckpointRead read) {
  CheckpointModel m;
  ASSIGN_OR_RETURN(m.info, OpenModelFolder(checkpoint, read));
  ASSIGN_OR_RETURN(m.config, model::ReadHfConfig(m.info.dir + "/config.json"));
  m.pool = std::make_unique<ThreadPool>(threads);
  m.ctx = MakeModelCtx(*m.pool, m.config);
  *options = {.precision = precision};
  if (model::IsFp8(precision)) {
    if (m.info.step >= 0) {  // an export has no run config: the recipe's defaults
      ASSIGN_OR_RETURN(Config run, Config::FromFile(m.info.dir + "/config.toml"));
      ASSIGN_OR_RETURN(*options, Fp8SettingsOf(run, *options));
    }
    if (run_fp8 != nullptr) {
      ASSIGN_OR_RETURN(*options, Fp8SettingsOf(*run_fp8, *options));
    }
  }
  return m;
}

// The checkpoint's weights into `params` (whose padding is zero), the bf16
// copy refreshed, fp8-delayed's scales restored.
Status LoadWeights(const CheckpointModel& m, model::LlamaParams& params,
                   model::Fp8DelayedScaling* delayed) {
  RETURN_IF_ERROR(model::LoadCheckpointWeights(m.info.dir, params));
  params.RefreshBf16(*m.ctx);
  if (delayed != nullptr) RETURN_IF_ERROR(RestoreDelayedScales(m.info.dir, delayed));
  return Status::Ok();
}

}  // namespace

const model::ForwardWeights& CheckpointModel::forward_weights() const {
  CHECK(inference != nullptr || llama != nullptr) << "no model loaded";
  return inference != nullptr ? inference->forward_weights() : llama->forward_weights();
}

Result<CheckpointModel> LoadCheckpointModel(const std::string& checkpoint,
                                            model::Precision precision, int threads,
                                            int64_t max_batch, Config* run_fp8,
                                            io::CheckpointRead read, bool whole_grads) {
  model::ForwardOptions o;
  ASSIGN_OR_RETURN(CheckpointModel m, Open(checkpoint, precision, threads, run_fp8, &o, read));
  RETURN_IF_ERROR(model::CheckParamBuffers(m.config, {.grads = whole_grads})
                      .WithContext(fmt::format("{}: ZeRO-2", m.info.dir)));
  const model::LlamaOptions options{.precision = o.precision,
                                    .max_batch = max_batch,
                                    .max_seq_len = m.config.max_seq_len,
                                    .buffers = {.grads = whole_grads},
                                    .fp8 = o.fp8,
                                    .fp8_high_precision_layers = o.fp8_high_precision_layers};
  m.llama = std::make_unique<model::Llama>(m.config, options, *m.ctx);
  m.llama->InitWeights(*m.ctx, 0);  // zeroes the padding; the load overwrites every tensor
  RETURN_IF_ERROR(LoadWeights(m, m.llama->params(), m.llama->fp8_delayed()));
  return m;
}

Result<CheckpointModel> LoadInferenceModel(const std::string& checkpoint,
                                           model::Precision precision, int threads) {
  model::ForwardOptions o;
  ASSIGN_OR_RETURN(CheckpointModel m,
                   Open(checkpoint, precision, threads, nullptr, &o, io::CheckpointRead::kModel));
  m.inference = std::make_unique<model::InferenceModel>(m.config, o, *m.ctx);
  RETURN_IF_ERROR(LoadWeights(m, m.inference->params(), m.inference->fp8_delayed()));
  return m;
}

std::string DelayedScalingNote(const CheckpointModel& m, model::Precision precision) {
  if (precision != model::Precision::kFp8Delayed || m.forward_weights().ScalesFixed()) return "";
  return fmt::format(
      "fp8-delayed: {} lacks amax histories for FP8 tensors (a checkpoint "
      "without run state, or a run in another precision), so those are scaled by "
      "their current amax, as fp8-tensor does",
      m.info.dir);
}

namespace {

// The config.toml of the run that saved `m`; an export has none, and the
// error says what to `pass` instead.
Result<Config> RunConfigOf(const CheckpointModel& m, const std::string& pass) {
  if (m.info.step < 0) {
    return InvalidArgument(
        fmt::format("{}: an export carries no run config; pass {}", m.info.dir, pass));
  }
  return Config::FromFile(m.info.dir + "/config.toml");
}

}  // namespace

Result<int64_t> RunSeqLen(const CheckpointModel& m, int64_t requested) {
  int64_t t = requested;
  if (t == 0) {
    ASSIGN_OR_RETURN(Config run, RunConfigOf(m, "--seq-len"));
    if (!run.Has("train.seq_len")) {
      return InvalidArgument(fmt::format(
          "{}/config.toml: no train.seq_len (not a run of `anvil train`); pass --seq-len",
          m.info.dir));
    }
    ASSIGN_OR_RETURN(t, run.GetInt("train.seq_len", 0));
  }
  if (t < 1 || t > m.config.max_seq_len) {
    return InvalidArgument(fmt::format("sequence length {} is not in [1, model.max_seq_len = {}]",
                                       t, m.config.max_seq_len));
  }
  return t;
}

Result<data::TokenShard> OpenValidationShard(const CheckpointModel& m, std::string data_dir,
                                             const std::string& hint) {
  if (data_dir.empty()) {
    ASSIGN_OR_RETURN(Config run, RunConfigOf(m, hint));
    ASSIGN_OR_RETURN(data_dir, run.GetString("data.dir", ""));
  }
  if (data_dir.empty()) {
    return InvalidArgument(fmt::format(
        "{}/config.toml: no data.dir naming the validation shard; pass {}", m.info.dir, hint));
  }
  ASSIGN_OR_RETURN(data::TokenShard shard, data::TokenShard::Open(data_dir + "/val.bin"));
  if (shard.vocab_size() > m.config.vocab_size) {
    return InvalidArgument(fmt::format("{}/val.bin: vocabulary of {} tokens exceeds the model's {}",
                                       data_dir, shard.vocab_size(), m.config.vocab_size));
  }
  return shard;
}

}  // namespace anvil::infer
