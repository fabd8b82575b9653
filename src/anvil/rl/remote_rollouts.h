// Asynchronous off-by-one rollouts on an MPI rank of their own: the trainer
// rank (RemoteRollouts) sends the rollout rank (ServeRollouts) the snapshot's
// weights and the next step's prompts as the step starts (with a reward
// command, once the step's rewards are in), trains, then receives the
// samples. The rollout rank runs the same engine over the same
// weights as AsyncRollouts' thread would, so a run gives the same samples,
// log-probabilities and metrics bit for bit whichever draws them
// (tests/rl/mpi_rollouts_test.sh). The trainer keeps the snapshot, so its
// checkpoints hold it and a resumed run draws the same samples again.
//
// Messages on the world group, in order (each of a size the receiver knows
// or was sent first; a draw's sends are asynchronous, waited for in Wait):
//   setup   trainer -> rollout  what the engine needs (model shape, precision
//                               and FP8 recipe, engine options, stop strings
//                               with the tokens' text); answered with a status
//   draw    trainer -> rollout  step, staleness, prompts, the snapshot's f32
//                               weights (and fp8-delayed's scales); answered
//                               with the samples or an error
//   stop    trainer -> rollout  ends ServeRollouts (the trainer's destructor)
// A draw cannot be interrupted: Cancel waits for the one in flight.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"
#include "anvil/infer/rollout.h"
#include "anvil/model/int_linear.h"
#include "anvil/rl/async_rollouts.h"
#include "anvil/rl/policy.h"

namespace anvil::rl {

class RemoteRollouts final : public RolloutsAhead {
 public:
  // Sets up rank `rollout_rank` of `world` (running ServeRollouts) to draw
  // with `options` from snapshots of `policy` (in its precision and recipe;
  // `quant`: through integer layers), on `threads` threads there; the snapshot starts as the
  // policy's weights. Both ranks' watchdogs then wait `timeout_s` for the
  // other (comm.timeout_s: longer than a training step with its evaluation
  // and checkpoint, and than a draw), and name it past that.
  static Result<std::unique_ptr<RemoteRollouts>> Create(comm::Group& world, int rollout_rank,
                                                        const Policy& policy,
                                                        const infer::RolloutOptions& options,
                                                        model::WeightQuant quant, int threads,
                                                        double timeout_s);
  ~RemoteRollouts() override;  // waits for a draw in flight, then ends the rollout rank's loop

  void Snapshot(const model::Llama& policy) override;
  void Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness) override;
  bool in_flight() const override { return in_flight_; }
  Result<Rollouts> Wait() override;
  void Cancel() override;
  Status SaveSnapshot(const std::string& path) const override;
  Status LoadSnapshot(const std::string& path) override;

 private:
  RemoteRollouts(comm::Group& world, int rollout_rank, const infer::RolloutOptions& options,
                 int64_t weights, bool delayed);

  comm::Group& world_;
  int peer_;
  infer::RolloutOptions options_;  // the sampling and G the samples come with
  std::vector<float> snapshot_;
  bool delayed_;                          // fp8-delayed: its scales travel with the weights
  std::vector<double> snapshot_delayed_;  // those scales (Fp8DelayedScaling::Save)
  // The draw in flight's messages (sends complete before Wait returns).
  std::vector<int64_t> header_;
  std::vector<int32_t> prompt_words_;
  std::vector<comm::Handle> sends_;
  bool in_flight_ = false;
};

// The rollout rank's side: sets up as `trainer` asks, then draws until it
// says stop. An error in setup is returned (after telling the trainer); an
// error in a draw is sent to the trainer, whose run reports it.
Status ServeRollouts(comm::Group& world, int trainer);

}  // namespace anvil::rl
