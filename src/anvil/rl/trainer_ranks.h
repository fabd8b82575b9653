// The ranks that train an RL run together, and how a step's work is cut
// among them: data parallelism as `anvil train`'s (parallel/data_parallel.h,
// ZeRO-0, 1 or 2), with the same order of sums.
//
// An update's rows are cut into S = ranks x grad_accum contiguous slots, in
// order; micro-batch i of rank r is slot i * ranks + r, and the update's
// gradient is the left fold over the slots, ((g0 + g1) + g2) + ... So one
// process with rl.grad_accum = S, S ranks with 1 and S/2 ranks with 2 train
// to the same bits (tests/rl/mpi_rollouts_test.sh). One slot, the default
// in one process, is the whole update in one forward/backward.
//
// Work whose rows are independent of each other is cut into one contiguous
// share per rank and gathered: the colocated rollouts (a sample's tokens
// depend on its request and sample index only) and the log-probability
// recomputes (batch invariant). Every rank then holds the whole step's
// numbers and forms the same advantages, token weights and metrics; the
// small sums of each slot (the value head's gradient and loss) are gathered
// and folded in slot order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/core/thread_pool.h"
#include "anvil/model/llama.h"
#include "anvil/parallel/data_parallel.h"
#include "anvil/rl/policy_step.h"

namespace anvil::rl {

class TrainerRanks {
 public:
  // `group`: the trainer ranks (a group of one: this process alone);
  // `grad_accum` micro-batches per rank and update; `zero` 0, 1 (each
  // rank's optimizers then hold the shard of parallel::ZeroShardCounts) or
  // 2 (and its shard of the gradient: `policy` is built without its whole
  // grads, PolicyOptions::whole_grads); `critic`: PPO's separate critic
  // model, or null (at most ZeRO-1: a trunk without its LM head holds its
  // whole buffers). The group, models and pool must outlive this.
  TrainerRanks(comm::Group& group, int grad_accum, int zero, model::Llama& policy,
               model::Llama* critic, ThreadPool& pool);

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  comm::Group& group() { return group_; }
  int grad_accum() const { return grad_accum_; }
  int slots() const { return size() * grad_accum_; }
  // Rows [first, last) of slot `slot` of an update's rows [r0, r1).
  std::pair<int64_t, int64_t> SlotRows(int64_t r0, int64_t r1, int slot) const;
  // Rank `rank`'s share [first, last) of n items (rows, prompts).
  std::pair<int64_t, int64_t> Share(int64_t n, int rank) const;
  std::pair<int64_t, int64_t> Share(int64_t n) const { return Share(n, rank()); }

  parallel::DataParallel& policy_dp() { return *policy_dp_; }
  // A slot's backward through `model`, reduced by `dp` (its policy_dp or
  // critic_dp): BeginSlot before it (waits for the reductions still reading
  // the grads, and zeroes them); AddReduction sets the hooks of its
  // ForwardBackward (under ZeRO-2 each unit's backward writes a zeroed slot
  // of dp's); a slot without rows calls EmptySlot instead (it adds zeros).
  static void BeginSlot(parallel::DataParallel& dp, int index, model::Llama& model,
                        const kernels::KernelCtx& ctx);
  static void AddReduction(parallel::DataParallel& dp, model::Llama& model,
                           model::StepHooks& hooks);
  static void EmptySlot(parallel::DataParallel& dp, const model::Llama& model);
  parallel::DataParallel* critic_dp() { return critic_dp_.get(); }
  // After an optimizer step on `dp`'s gradient (ZeRO-1/2: this rank's shard of
  // `model`'s weights): every rank's updated weights on every rank, and the
  // bf16 copy rewritten from them (a no-op at ZeRO-0).
  void GatherWeights(parallel::DataParallel& dp, model::Llama& model,
                     const kernels::KernelCtx& ctx);
  // fp8-delayed, around a training step's forwards and backwards on `model`
  // (a no-op in other precisions): Begin starts recording amaxes; End takes
  // their max over the ranks (a NaN passed as +inf, which EndStep skips) so
  // every rank keeps the same scales, and moves the scales to the next step.
  static void BeginDelayedStep(model::Llama& model);
  void EndDelayedStep(model::Llama& model);

  // Per-row values gathered: row k of `first.size() - 1` rows owns
  // values[first[k] - first[0], first[k + 1] - first[0]); this rank filled
  // the rows of its Share, and after the call every rank holds all of them.
  void GatherShares(std::span<const int64_t> first, std::span<double> values);
  // Each of this rank's micro-batches' `width` values (grad_accum x width,
  // in micro-batch order) -> every slot's (slots x width, in slot order).
  std::vector<double> AllSlots(std::span<const double> mine, int64_t width);

 private:
  comm::Group& group_;
  int grad_accum_;
  std::unique_ptr<parallel::DataParallel> policy_dp_, critic_dp_;
};

// Every trainer rank must run the kernels rank 0 runs (`mine`:
// KernelCtx::BitsName), or their gradients of the same rows would differ:
// an error on every rank when one differs.
Status CheckSameKernels(comm::Group& trainers, const std::string& mine);

// The most rows a slot can have: `minibatches` updates over `rows` rows,
// each cut into `slots`.
int64_t SlotRowsAtMost(int64_t rows, int64_t minibatches, int64_t slots);

// Colocated rollouts of a step over the trainer ranks: rank r draws prompts
// [Share(P)) with `engine` (as their requests in the whole step), and every
// rank gets every sample, in (prompt, sample) order: the samples of one
// process drawing them all, bit for bit. The stats add the ranks' tokens;
// the time and decode passes are the slowest rank's, the engine bytes this
// rank's. `cancel` (may be empty; GenerateRollouts'): a draw it cut on any
// rank ends the call with a Cancelled status on every rank.
Result<Rollouts> GenerateShared(infer::RolloutEngine& engine, const kernels::KernelCtx& ctx,
                                std::span<const std::vector<int32_t>> prompts, int64_t step,
                                TrainerRanks& ranks, const std::function<bool()>& cancel = {});

// Rank `root`'s rollouts on every rank of `group` (`rollouts` is read on the
// root, written on the others).
void BroadcastRollouts(comm::Group& group, int root, Rollouts& rollouts);

}  // namespace anvil::rl
