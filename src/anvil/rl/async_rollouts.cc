// Asynchronous off-by-one rollouts (async_rollouts.h).
#include "anvil/rl/async_rollouts.h"

#include <fmt/core.h>

#include <algorithm>

#include "anvil/core/check.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/io/flat_shards.h"
#include "anvil/io/safetensors.h"

namespace anvil::rl {

AsyncRollouts::AsyncRollouts(const Policy& policy, const infer::RolloutOptions& options,
                             model::WeightQuant quant, int threads)
    : AsyncRollouts(policy.config, policy.llama->options().precision, options, quant, threads) {
  Snapshot(*policy.llama);
}

AsyncRollouts::AsyncRollouts(const model::ModelConfig& config, model::Precision precision,
                             const infer::RolloutOptions& options, model::WeightQuant quant,
                             int threads)
    : pool_(threads) {
  CHECK_GE(threads, 1);
  // The snapshot carries weights, not an FP8 recipe's settings or scales.
  CHECK(!model::IsFp8(precision)) << "asynchronous rollouts of an FP8 policy are not implemented";
  ctx_ = infer::MakeModelCtx(pool_, config);
  snapshot_ = std::make_unique<model::InferenceModel>(
      config, model::ForwardOptions{.precision = precision}, *ctx_);
  infer::RolloutOptions o = options;
  if (quant != model::WeightQuant::kNone) {
    quantized_ = std::make_unique<model::IntLinear>(
        snapshot_->forward_weights(), quant, std::max(options.max_batch, config.max_seq_len),
        *ctx_);
    o.linear = quantized_.get();
  }
  engine_ = std::make_unique<infer::RolloutEngine>(snapshot_->forward_weights(), o);
}

AsyncRollouts::~AsyncRollouts() { Cancel(); }

void AsyncRollouts::Cancel() {
  if (!pending_.valid()) return;
  cancel_.store(true, std::memory_order_relaxed);
  pending_.wait();
  pending_ = {};
  cancel_.store(false, std::memory_order_relaxed);
}

void AsyncRollouts::Snapshot(const model::Llama& policy) {
  CHECK(!in_flight()) << "a snapshot while its rollouts are drawn";
  const model::LlamaParams& from = policy.params();
  model::LlamaParams& to = snapshot_->params();
  CHECK_EQ(from.size(), to.size());
  std::copy(from.weights().begin(), from.weights().end(), to.weights().begin());
  std::copy(from.bf16().begin(), from.bf16().end(), to.bf16().begin());
}

Status AsyncRollouts::SetSnapshot(const std::function<Status(std::span<float> weights)>& fill) {
  CHECK(!in_flight()) << "a snapshot while its rollouts are drawn";
  RETURN_IF_ERROR(fill(snapshot_->params().weights()));
  snapshot_->RefreshBf16Weights(*ctx_);
  return Status::Ok();
}

void AsyncRollouts::Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness) {
  CHECK(!in_flight()) << "one draw at a time";
  prompts_ = std::move(prompts);
  pending_ = std::async(std::launch::async, [this, step, staleness]() -> Result<Rollouts> {
    if (quantized_) quantized_->Requantize(snapshot_->forward_weights(), *ctx_);
    ASSIGN_OR_RETURN(Rollouts r, GenerateRollouts(*engine_, *ctx_, prompts_, step, &cancel_));
    r.staleness = staleness;
    return r;
  });
}

Result<Rollouts> AsyncRollouts::Wait() {
  CHECK(in_flight()) << "no draw started";
  return pending_.get();
}

Status SaveSnapshotFile(const std::string& path, std::span<const float> weights) {
  const auto size = static_cast<int64_t>(weights.size());
  const io::FlatPart parts[] = {{"weights", weights.data()}};
  return io::WriteFlatShard(path, size, 0, size, parts, {{"layout", "anvil flat parameter buffer"}});
}

Status LoadSnapshotFile(const std::string& path, std::span<float> weights) {
  const auto size = static_cast<int64_t>(weights.size());
  const io::FlatTarget targets[] = {{"weights", weights.data()}};
  return io::ReadFlatRange(std::span<const std::string>(&path, 1), size, 0, size, targets);
}

Status AsyncRollouts::SaveSnapshot(const std::string& path) const {
  return SaveSnapshotFile(path, snapshot_->params().weights());
}

Status AsyncRollouts::LoadSnapshot(const std::string& path) {
  return SetSnapshot([&](std::span<float> weights) { return LoadSnapshotFile(path, weights); });
}

}  // namespace anvil::rl
