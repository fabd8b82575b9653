// Asynchronous off-by-one rollouts: the samples of step k + 1 are drawn on a
// thread of their own (with a thread pool of their own) while the trainer
// trains on step k's. They come from a snapshot of the policy's weights
// taken as step k starts, the weights step k trains from, so they are one
// step stale when step k + 1 trains on them (the first step's are not:
// staleness 0, then 1). The trainer's clip ratio is against its own
// recomputed log-probabilities, and each token's policy term is weighted by
// the truncated importance ratio to the sampler's log-probabilities
// (grpo.h), which are exact: the snapshot's training forward gives them bit
// for bit (the test recomputes them).
//
// The snapshot is a copy (the trainer updates the live weights while it is
// read), a decode-only model::InferenceModel. A checkpoint holds it
// (SaveSnapshot), so a resumed run draws its next step's samples from the
// same weights again: bitwise the same run.
//
// Not the MPI form yet: rollout and trainer ranks once the distributed
// layers carry a policy.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
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

class AsyncRollouts {
 public:
  // A snapshot model of `policy`'s shape and precision, an engine over it
  // with `options`, and a pool of `threads` threads (>= 1) for them;
  // `quant` other than kNone samples through integer layers quantized from
  // the snapshot (an f32 policy).
  AsyncRollouts(const Policy& policy, const infer::RolloutOptions& options,
                model::WeightQuant quant, int threads);
  ~AsyncRollouts();  // cancels a draw in flight (Cancel)

  // Copies the policy's current weights into the snapshot. No draw may be
  // in flight.
  void Snapshot(const model::Llama& policy);
  // Starts drawing step `step`'s samples of `prompts` from the snapshot; one
  // draw at a time. `staleness`: what Wait reports with them.
  void Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness);
  bool in_flight() const { return pending_.valid(); }
  // The samples of the draw Start began, once they are ready.
  Result<Rollouts> Wait();
  // Ends a draw in flight at its next decode step and drops it (a run that
  // stops: its checkpoint keeps the snapshot, from which a resumed run draws
  // the same samples again). Nothing in flight: nothing to do.
  void Cancel();

  // The snapshot's weights, one flat f32 file; Load needs a model of the
  // same shape.
  Status SaveSnapshot(const std::string& path) const;
  Status LoadSnapshot(const std::string& path);
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

}  // namespace anvil::rl
