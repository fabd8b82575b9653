// Asynchronous off-by-one rollouts (async_rollouts.h).
#include "anvil/rl/async_rollouts.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "anvil/core/check.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/io/flat_shards.h"
#include "anvil/io/safetensors.h"

namespace anvil::rl {

std::vector<double> DelayedState(const model::Llama& policy) {
  const model::Fp8DelayedScaling* delayed = policy.fp8_delayed();
  return delayed != nullptr ? delayed->Save() : std::vector<double>{};
}

model::ForwardOptions ForwardOptionsOf(const model::Llama& policy) {
  const model::LlamaOptions& o = policy.options();
  return {.precision = o.precision,
          .fp8 = o.fp8,
          .fp8_high_precision_layers = o.fp8_high_precision_layers};
}

AsyncRollouts::AsyncRollouts(const Policy& policy, const infer::RolloutOptions& options,
                             model::WeightQuant quant, int threads)
    : AsyncRollouts(policy.config, ForwardOptionsOf(*policy.llama), options, quant, threads) {
  Snapshot(*policy.llama);
}

AsyncRollouts::AsyncRollouts(const model::ModelConfig& config, const model::ForwardOptions& forward,
                             const infer::RolloutOptions& options, model::WeightQuant quant,
                             int threads)
    : pool_(threads) {
  CHECK_GE(threads, 1);
  ctx_ = infer::MakeModelCtx(pool_, config);
  snapshot_ = std::make_unique<model::InferenceModel>(config, forward, *ctx_);
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
  CHECK_EQ(from.bf16().size(), to.bf16().size());
  std::copy(from.bf16().begin(), from.bf16().end(), to.bf16().begin());
  if (model::Fp8DelayedScaling* delayed = snapshot_->fp8_delayed()) {
    CHECK(delayed->Restore(DelayedState(policy))) << "the snapshot's fp8-delayed scales";
  }
}

Status AsyncRollouts::SetSnapshot(const std::function<Status(std::span<float> weights)>& fill,
                                  std::span<const double> delayed) {
  CHECK(!in_flight()) << "a snapshot while its rollouts are drawn";
  RETURN_IF_ERROR(fill(snapshot_->params().weights()));
  snapshot_->RefreshBf16Weights(*ctx_);
  model::Fp8DelayedScaling* scales = snapshot_->fp8_delayed();
  if ((scales != nullptr) != !delayed.empty() || (scales != nullptr && !scales->Restore(delayed))) {
    return DataLoss(fmt::format(
        "the snapshot's fp8-delayed scales: {} values for {}", delayed.size(),
        scales != nullptr
            ? "a model that keeps " + std::to_string(scales->tensors()) + " tensors' histories"
            : std::string("a model without them")));
  }
  return Status::Ok();
}

void AsyncRollouts::Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness) {
  CHECK(!in_flight()) << "one draw at a time";
  prompts_ = std::move(prompts);
  pending_ = std::async(std::launch::async, [this, step, staleness]() -> Result<Rollouts> {
    if (quantized_) quantized_->Requantize(snapshot_->forward_weights(), *ctx_);
    ASSIGN_OR_RETURN(Rollouts r, GenerateRollouts(*engine_, *ctx_, prompts_, step, [this] {
                       return cancel_.load(std::memory_order_relaxed);
                     }));
    r.staleness = staleness;
    return r;
  });
}

Result<Rollouts> AsyncRollouts::Wait() {
  CHECK(in_flight()) << "no draw started";
  return pending_.get();
}

namespace {
constexpr const char* kDelayedKey = "fp8_delayed";  // the snapshot file's metadata
}  // namespace

Status SaveSnapshotFile(const std::string& path, std::span<const float> weights,
                        std::span<const double> delayed) {
  const auto size = static_cast<int64_t>(weights.size());
  const io::FlatPart parts[] = {{"weights", weights.data()}};
  std::map<std::string, std::string> metadata = {{"layout", "anvil flat parameter buffer"}};
  if (!delayed.empty()) {
    metadata[kDelayedKey] =
        nlohmann::json(std::vector<double>(delayed.begin(), delayed.end())).dump();
  }
  return io::WriteFlatShard(path, size, 0, size, parts, std::move(metadata));
}

Status LoadSnapshotFile(const std::string& path, std::span<float> weights,
                        std::vector<double>* delayed) {
  const auto size = static_cast<int64_t>(weights.size());
  const io::FlatTarget targets[] = {{"weights", weights.data()}};
  return io::ReadFlatRange(
      std::span<const std::string>(&path, 1), size, 0, size, targets,
      [&](const io::SafetensorsFile& file) -> Status {
        if (delayed == nullptr) return Status::Ok();
        const auto it = file.metadata().find(kDelayedKey);
        if (it == file.metadata().end()) {
          return DataLoss(fmt::format("{}: holds no fp8-delayed scales", path));
        }
        const nlohmann::json j = nlohmann::json::parse(it->second, nullptr, /*exceptions=*/false);
        if (!j.is_array()) return DataLoss(fmt::format("{}: malformed fp8-delayed scales", path));
        delayed->clear();
        for (const nlohmann::json& v : j) {
          if (!v.is_number())
            return DataLoss(fmt::format("{}: malformed fp8-delayed scales", path));
          delayed->push_back(v.get<double>());
        }
        return Status::Ok();
      });
}

Status AsyncRollouts::SaveSnapshot(const std::string& path) const {
  const model::Fp8DelayedScaling* delayed = snapshot_->fp8_delayed();
  return SaveSnapshotFile(path, snapshot_->params().weights(),
                          delayed != nullptr ? delayed->Save() : std::vector<double>{});
}

Status AsyncRollouts::LoadSnapshot(const std::string& path) {
  CHECK(!in_flight()) << "a snapshot load while its rollouts are drawn";
  std::vector<double> delayed;
  RETURN_IF_ERROR(LoadSnapshotFile(path, snapshot_->params().weights(),
                                   snapshot_->fp8_delayed() != nullptr ? &delayed : nullptr));
  // The weights are in place: the bf16 copy and the scales follow.
  return SetSnapshot([](std::span<float>) { return Status::Ok(); }, delayed);
}

}  // namespace anvil::rl
