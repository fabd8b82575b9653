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
    : pool_(threads) {
  CHECK_GE(threads, 1);
  // The snapshot carries weights, not an FP8 recipe's settings or scales.
  CHECK(!model::IsFp8(policy.llama->options().precision))
      << "asynchronous rollouts of an FP8 policy are not implemented";
  ctx_ = infer::MakeModelCtx(pool_, policy.config);
  snapshot_ = std::make_unique<model::InferenceModel>(
      policy.config, model::ForwardOptions{.precision = policy.llama->options().precision},
      *ctx_);
  Snapshot(*policy.llama);
  infer::RolloutOptions o = options;
  if (quant != model::WeightQuant::kNone) {
    quantized_ = std::make_unique<model::IntLinear>(
        snapshot_->forward_weights(), quant, std::max(options.max_batch, policy.config.max_seq_len),
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

Status AsyncRollouts::SaveSnapshot(const std::string& path) const {
  const model::LlamaParams& p = snapshot_->params();
  const io::FlatPart parts[] = {{"weights", p.weights().data()}};
  return io::WriteFlatShard(path, p.size(), 0, p.size(), parts,
                            {{"layout", "anvil flat parameter buffer"}});
}

Status AsyncRollouts::LoadSnapshot(const std::string& path) {
  CHECK(!in_flight()) << "a snapshot load while its rollouts are drawn";
  model::LlamaParams& p = snapshot_->params();
  const io::FlatTarget targets[] = {{"weights", p.weights().data()}};
  RETURN_IF_ERROR(
      io::ReadFlatRange(std::span<const std::string>(&path, 1), p.size(), 0, p.size(), targets));
  snapshot_->RefreshBf16Weights(*ctx_);
  return Status::Ok();
}

}  // namespace anvil::rl
