// Asynchronous off-by-one rollouts: the samples of step k + 1 are drawn on a
// thread of their own (with a thread pool of their own) while the trainer
// trains on step k's. They come from a snapshot of the policy's weights
// taken as step k starts (with a reward command, once step k's rewards are
// in: rl_run.cc), the weights step k trains from, so they are one
// step stale when step k + 1 trains on them (the first step's are not:
// staleness 0, then 1). The trainer's clip ratio is against its own
// recomputed log-probabilities, and each token's policy term is weighted by
// the truncated importance ratio to the sampler's log-probabilities
// (grpo.h), which are exact: the snapshot's training forward gives them bit
// for bit (the test recomputes them).
//
// The snapshot is a copy (the trainer updates the live weights while it is
// read), a decode-only model::InferenceModel in the policy's precision and
// FP8 recipe; fp8-delayed's scales are copied with the weights (the scales
// the step trains with). A checkpoint holds it (SaveSnapshot), so a resumed
// run draws its next step's samples from the same weights again: bitwise
// the same run.
//
// The same draws can come from a rank of their own instead of a thread
// (remote_rollouts.h): RolloutsAhead is what the RL loop sees of either.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/core/thread_pool.h"
#include "anvil/infer/rollout.h"
#include "anvil/model/inference_model.h"
#include "anvil/model/int_linear.h"
#include "anvil/model/llama.h"
#include "anvil/rl/policy.h"
#include "anvil/rl/policy_step.h"

namespace anvil::rl {

// The next step's samples drawn ahead from a snapshot of the policy.
class RolloutsAhead {
 public:
  virtual ~RolloutsAhead() = default;
  // Copies the policy's current weights (and fp8-delayed's scales) into the
  // snapshot. No draw may be in flight.
  virtual void Snapshot(const model::Llama& policy) = 0;
  // Starts drawing step `step`'s samples of `prompts` from the snapshot; one
  // draw at a time. `staleness`: what Wait reports with them.
  virtual void Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness) = 0;
  virtual bool in_flight() const = 0;
  // The samples of the draw Start began, once they are ready.
  virtual Result<Rollouts> Wait() = 0;
  // Drops a draw in flight (a run that stops: its checkpoint keeps the
  // snapshot, from which a resumed run draws the same samples again): at
  // its next decode step on a thread, once it is done on another rank.
  // Nothing in flight: nothing to do.
  virtual void Cancel() = 0;
  // The snapshot's weights, one flat f32 file (fp8-delayed's scales in its
  // metadata); Load needs a model of the same shape and recipe.
  virtual Status SaveSnapshot(const std::string& path) const = 0;
  virtual Status LoadSnapshot(const std::string& path) = 0;
};

// Drawn on a thread of this process.
class AsyncRollouts final : public RolloutsAhead {
 public:
  // A snapshot model of `policy`'s shape, precision and FP8 recipe, an
  // engine over it with `options`, and a pool of `threads` threads (>= 1)
  // for them; `quant` other than kNone samples through integer layers
  // quantized from the snapshot (an f32 policy).
  AsyncRollouts(const Policy& policy, const infer::RolloutOptions& options,
                model::WeightQuant quant, int threads);
  // The same for a model of `config` run as `forward` says, its snapshot
  // zero until SetSnapshot (a rollout rank's: remote_rollouts.h).
  AsyncRollouts(const model::ModelConfig& config, const model::ForwardOptions& forward,
                const infer::RolloutOptions& options, model::WeightQuant quant, int threads);
  ~AsyncRollouts() override;  // cancels a draw in flight (Cancel)

  void Snapshot(const model::Llama& policy) override;
  // The snapshot's master weights written in place by `fill` (a file, a
  // message), then their bf16 copy (bf16) refreshed, and fp8-delayed's
  // scales restored from `delayed` (Fp8DelayedScaling::Save's form); fill's
  // error, or one naming scales that do not fit.
  Status SetSnapshot(const std::function<Status(std::span<float> weights)>& fill,
                     std::span<const double> delayed = {});
  void Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness) override;
  bool in_flight() const override { return pending_.valid(); }
  Result<Rollouts> Wait() override;
  // Ends a draw in flight at its next decode step and drops it.
  void Cancel() override;
  Status SaveSnapshot(const std::string& path) const override;
  Status LoadSnapshot(const std::string& path) override;
  const model::InferenceModel& snapshot() const { return *snapshot_; }
  const kernels::KernelCtx& ctx() const { return *ctx_; }

 private:
  ThreadPool pool_;
  std::unique_ptr<kernels::KernelCtx> ctx_;
  std::unique_ptr<model::InferenceModel> snapshot_;
  std::unique_ptr<model::IntLinear> quantized_;
  std::unique_ptr<infer::RolloutEngine> engine_;
  std::vector<std::vector<int32_t>> prompts_;  // the draw in flight's
  std::future<Result<Rollouts>> pending_;
  std::atomic<bool> cancel_{false};
};

// A snapshot's weights as one flat f32 file (a checkpoint's rollout
// snapshot), with fp8-delayed's scales (`delayed`, when not empty) in its
// metadata; Load fills `delayed`, when given, from a file that holds them
// (an error naming the file when it does not).
Status SaveSnapshotFile(const std::string& path, std::span<const float> weights,
                        std::span<const double> delayed = {});
Status LoadSnapshotFile(const std::string& path, std::span<float> weights,
                        std::vector<double>* delayed = nullptr);
// fp8-delayed's state of `policy` (Fp8DelayedScaling::Save; empty in other
// precisions), and the options its forward runs with (precision and recipe).
std::vector<double> DelayedState(const model::Llama& policy);
model::ForwardOptions ForwardOptionsOf(const model::Llama& policy);

}  // namespace anvil::rl
