// Post-training policies and their checkpoints (policy.h).
#include "anvil/rl/policy.h"

#include <fmt/core.h>

#include "anvil/core/file_util.h"
#include "anvil/data/tokenizer_json.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/infer/generate.h"
#include "anvil/io/checkpoint.h"
#include "anvil/model/checkpoint_weights.h"
#include "anvil/model/fp8_linear.h"
#include "anvil/model/hf_checkpoint.h"

namespace anvil::rl {
namespace {

// Not fp8-tensor: its scales come from a tensor's amax over the whole
// batch, so the rollout engine's log-probabilities could not be the
// trainer's bit for bit. The other recipes' do not depend on the batch (per
// block, per 32 values, or fp8-delayed's fixed for a step).
Status CheckPrecision(model::Precision precision) {
  if (precision == model::Precision::kFp8Tensor) {
    return InvalidArgument(
        "post-training runs in f32, bf16, fp8-block, mxfp8 or fp8-delayed (FP8 recipes whose "
        "scales do not depend on the batch), not fp8-tensor");
  }
  return Status::Ok();
}

// The model of `config` in `policy`, weights uninitialised.
Status Build(Policy& policy, const PolicyOptions& options) {
  RETURN_IF_ERROR(CheckPrecision(options.precision));
  RETURN_IF_ERROR(model::CheckParamBuffers(policy.config, {.grads = options.whole_grads})
                      .WithContext("ZeRO-2"));
  if (policy.tokenizer.vocab_size() > policy.config.vocab_size) {
    return InvalidArgument(fmt::format("the tokenizer has {} tokens, model.vocab_size is {}",
                                       policy.tokenizer.vocab_size(), policy.config.vocab_size));
  }
  if (options.max_batch < 1) return InvalidArgument("a policy needs max_batch >= 1");
  model::ForwardOptions recipe{.precision = options.precision};
  if (model::IsFp8(options.precision) && options.fp8_settings != nullptr) {
    ASSIGN_OR_RETURN(recipe, infer::Fp8SettingsOf(*options.fp8_settings, recipe));
  }
  policy.pool = std::make_unique<ThreadPool>(options.threads);
  policy.ctx = infer::MakeModelCtx(*policy.pool, policy.config);
  policy.llama = std::make_unique<model::Llama>(
      policy.config,
      model::LlamaOptions{.precision = options.precision,
                          .max_batch = options.max_batch,
                          .max_seq_len = policy.config.max_seq_len,
                          .buffers = {.grads = options.whole_grads},
                          .fp8 = recipe.fp8,
                          .fp8_high_precision_layers = recipe.fp8_high_precision_layers},
      *policy.ctx);
  return Status::Ok();
}

}  // namespace

std::vector<int32_t> Policy::PromptTokens(std::string_view text) const {
  std::vector<int32_t> out = {static_cast<int32_t>(tokenizer.bos_id())};
  for (const uint32_t id : tokenizer.Encode(text)) out.push_back(static_cast<int32_t>(id));
  return out;
}

std::vector<int32_t> Policy::ResponseTokens(std::string_view text) const {
  std::vector<int32_t> out;
  for (const uint32_t id : tokenizer.Encode(text)) out.push_back(static_cast<int32_t>(id));
  out.push_back(eos());
  return out;
}

std::string Policy::Text(std::span<const int32_t> tokens) const {
  if (!tokens.empty() && tokens.back() == eos()) tokens = tokens.first(tokens.size() - 1);
  std::string text;
  for (const int32_t t : tokens) text += tokenizer.TokenText(t);
  return text;
}

std::string Policy::Kernels() const {
  const model::LlamaOptions& o = llama->options();
  return ctx->BitsName(model::RunsBf16Gemms(o.precision, o.fp8));
}

Result<Policy> NewPolicy(const model::ModelConfig& config, data::Tokenizer tokenizer,
                         uint64_t seed, const PolicyOptions& options) {
  RETURN_IF_ERROR(config.Validate());
  Policy p{.config = config, .tokenizer = std::move(tokenizer)};
  RETURN_IF_ERROR(Build(p, options));
  p.llama->InitWeights(*p.ctx, seed);
  return p;
}

Result<Policy> LoadPolicy(const std::string& checkpoint, const PolicyOptions& options,
                          std::string* dir_out) {
  RETURN_IF_ERROR(CheckPrecision(options.precision));
  if (options.max_batch < 1) return InvalidArgument("a policy needs max_batch >= 1");
  ASSIGN_OR_RETURN(
      infer::CheckpointModel m,
      infer::LoadCheckpointModel(checkpoint, options.precision, options.threads, options.max_batch,
                                 options.fp8_settings, options.verify, options.whole_grads));
  ASSIGN_OR_RETURN(data::Tokenizer tokenizer, infer::CheckpointTokenizer(m.info.dir, ""));
  if (dir_out != nullptr) *dir_out = m.info.dir;
  return Policy{.config = m.config,
                .tokenizer = std::move(tokenizer),
                .pool = std::move(m.pool),
                .ctx = std::move(m.ctx),
                .llama = std::move(m.llama)};
}

Result<std::unique_ptr<model::Llama>> LoadReference(const std::string& checkpoint,
                                                    const Policy& policy, int64_t max_batch,
                                                    bool lm_head) {
  ASSIGN_OR_RETURN(const io::CheckpointInfo info,
                   infer::OpenModelFolder(checkpoint, io::CheckpointRead::kModel));
  ASSIGN_OR_RETURN(const model::ModelConfig config,
                   model::ReadHfConfig(info.dir + "/config.json"));
  if (model::HfConfigJson(config) != model::HfConfigJson(policy.config)) {
    return InvalidArgument(fmt::format("{}: the reference model's shape differs from the policy's",
                                       info.dir));
  }
  model::LlamaOptions options = policy.llama->options();
  options.max_batch = max_batch;
  options.lm_head = lm_head;
  options.buffers = {};  // whole, whatever the policy's (a trunk without its head needs them)
  auto reference = std::make_unique<model::Llama>(config, options, *policy.ctx);
  reference->InitWeights(*policy.ctx, 0);  // zeroes the padding; the load overwrites every tensor
  RETURN_IF_ERROR(model::LoadCheckpointWeights(info.dir, reference->params()));
  reference->RefreshBf16Weights(*policy.ctx);
  if (model::Fp8DelayedScaling* delayed = reference->fp8_delayed()) {
    RETURN_IF_ERROR(infer::RestoreDelayedScales(info.dir, delayed));
  }
  return reference;
}

bool StartDelayedScales(model::Llama& model, const kernels::KernelCtx& ctx,
                        std::span<const std::vector<int32_t>> prompts) {
  model::Fp8DelayedScaling* delayed = model.fp8_delayed();
  if (delayed == nullptr || model.forward_weights().ScalesFixed()) return false;
  delayed->BeginStep();
  std::vector<int32_t> targets;
  for (const std::vector<int32_t>& p : prompts) {
    // Each prompt's next tokens (the loss is not used; the amaxes are).
    targets.assign(p.begin() + 1, p.end());
    targets.push_back(model::kIgnoreIndex);
    model.Forward(
        ctx,
        {.rows = 1, .seq_len = static_cast<int64_t>(p.size()), .tokens = p, .targets = targets});
  }
  delayed->EndStep();
  return true;
}

std::unique_ptr<optim::AdamW> PolicyOptimizer(const Policy& policy,
                                              const optim::OptimConfig& config,
                                              std::optional<optim::Shard> shard) {
  const model::LlamaParams& params = policy.llama->params();
  return std::make_unique<optim::AdamW>(config, optim::LlamaParamGroups(params), params.size(),
                                        shard.value_or(optim::Shard{0, params.size()}));
}

Status WritePolicyFiles(const std::string& dir, const Policy& policy, const std::string& state_json,
                        const std::string& config_toml) {
  RETURN_IF_ERROR(model::SaveHfCheckpoint(dir, policy.llama->params()));
  RETURN_IF_ERROR(data::SaveTokenizer(policy.tokenizer, dir + "/tokenizer.json"));
  RETURN_IF_ERROR(WriteFileAtomic(dir + "/state.json", state_json));
  return WriteFileAtomic(dir + "/config.toml", config_toml);
}

}  // namespace anvil::rl
