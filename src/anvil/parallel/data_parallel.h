// Data parallelism: N ranks each run their micro-batches of a global step;
// gradients are reduced in buckets (or, from ZeRO-2, model units) while the
// backward still runs, and from ZeRO-1 each rank updates only its shard of
// the weights with its shard of the optimizer state.
//
// The order of the sum. A global step has S = N x grad_accum micro-batch
// slots; micro-batch i of rank r is slot i*N + r. The step's gradient is the
// left fold over the slots in order, ((g0 + g1) + g2) + ..., for every
// layout: after micro-batch i every rank's contribution is folded, in rank
// order, into the accumulated sum of the slots before (the comm layer's
// accumulating reduce-scatter, run by the rank that owns each element). So one
// process accumulating S micro-batches, S ranks with one each, and S/2 ranks
// with two each all produce the same bits, and a checkpoint continues under
// any layout of the same global batch.
//
// Buckets (contiguous ranges of whole tensors, about `bucket_elements`, cut
// in reverse layer order) are reduced as soon as the backward has passed them
// (Llama's GradsReady), overlapping the layers still to come:
//   ZeRO-0: all-reduced on the last micro-batch (reduce-scattered into the
//           sum on earlier ones); every rank ends with the whole gradient.
//   ZeRO-1: reduce-scattered; each rank holds the sum over its shard only
//           (also ZeRO-2/3, by units, below).
// With one micro-batch per rank the reduction runs in place in the model's
// grad buffer; with more, into an accumulation buffer (ZeRO-0: whole, as the
// sum is all-gathered into it; ZeRO-1: this rank's shard only), and the next
// micro-batch's backward waits for the previous one's reductions (it reuses
// the model's grad buffer).
//
// ZeRO-2 and ZeRO-3 go by the model's units (embedding, each layer, head)
// instead of buckets: the model holds no whole grad buffer; each unit's
// backward writes into one of two unit-sized slots (BeginUnitBackward), which
// is reduce-scattered into this rank's shard of the sum as soon as the unit
// is done and reused two units later. (ZeRO-3's weights: weight_gather.h.)
//
// Shards are SplitEvenly over the flat buffer at multiples of
// optim::kNormChunk, so the global norm assembled from the shards' chunk sums
// is the whole buffer's, bitwise.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/core/aligned_buffer.h"
#include "anvil/core/thread_pool.h"
#include "anvil/optim/adamw.h"

namespace anvil::parallel {

struct DataParallelOptions {
  int zero = 0;                    // 0 .. 3
  int64_t bucket_elements = 1 << 22;
  bool overlap = true;             // false: every bucket is reduced after the backward
  int64_t grad_accum = 1;          // micro-batches per rank and step
};

// A contiguous range [begin, end) of the flat buffers.
struct Bucket {
  int64_t begin = 0, end = 0;
};

// Buckets of whole tensors, from the end of the buffer backwards: a bucket
// closes once it holds at least `bucket_elements`. `tensor_begins` are the
// tensors' first offsets (ascending, the first 0); `size` the buffer length.
// Returned in the order the backward completes them (last tensors first).
std::vector<Bucket> PlanBuckets(std::span<const int64_t> tensor_begins, int64_t size,
                                int64_t bucket_elements);

// The elements each of `ranks` ranks owns of a `size`-element layout from
// ZeRO-1 on (in rank order): even cuts at multiples of optim::kNormChunk.
std::vector<int64_t> ZeroShardCounts(int64_t size, int ranks);
// Rank `rank`'s range when ranks own `counts` elements each, in rank order.
optim::Shard ShardOf(std::span<const int64_t> counts, int rank);
// How many elements of [begin, end) each rank owns under `counts`.
std::vector<int64_t> OverlapCounts(std::span<const int64_t> counts, int64_t begin, int64_t end);

class DataParallel {
 public:
  // A layout of `size` elements; `grads` is the model's flat grad buffer
  // (empty under ZeRO-2/3); `tensor_begins` the tensors' first offsets,
  // `unit_begins` the units' (with `size` last). The group and the pool must
  // outlive this object.
  DataParallel(comm::Group& group, ThreadPool& pool, const DataParallelOptions& options,
               int64_t size, std::span<float> grads, std::span<const int64_t> tensor_begins,
               std::span<const int64_t> unit_begins);

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  comm::Group& group() { return group_; }
  const DataParallelOptions& options() const { return options_; }
  // This rank's shard (ZeRO-1..3) or the whole buffer (ZeRO-0).
  optim::Shard shard() const { return shard_; }
  // Elements per rank of the sharding.
  const std::vector<int64_t>& shard_counts() const { return shard_counts_; }
  // Bytes this object allocated (gradient sum, unit slots), for memory reports.
  int64_t allocated_bytes() const {
    return static_cast<int64_t>(accum_.size() + slots_[0].size() + slots_[1].size());
  }
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // Before micro-batch `index` (0 .. grad_accum - 1) of a step, and before the
  // model's grads are zeroed for it: waits for the previous micro-batch's
  // reductions, which read them.
  void BeginMicroBatch(int index);
  // ZeRO-2/3, before unit `unit`'s backward: a zeroed slot for its grads
  // (laid out as the unit's range of the layout).
  float* BeginUnitBackward(int unit);
  // Llama's GradsReady: grads in [from, end) are final for this micro-batch
  // (ZeRO-2/3: `from` is the unit's start; its slot is reduced).
  void OnGradsReady(int64_t from);
  // After the last micro-batch: waits for every reduction. Returns the summed
  // gradient: the whole buffer (ZeRO-0), or from ZeRO-1 the shard's part
  // alone (or the whole buffer of which only shard() is valid).
  std::span<const float> FinishReduction();
  // The L2 norm of the summed gradient (as FinishReduction returned it) over
  // every rank's part.
  double GradNorm(std::span<const float> reduced);
  // ZeRO-1/2: every rank's updated shard of `weights` to every rank (a no-op
  // at ZeRO-0; ZeRO-3 keeps no whole weights).
  void GatherWeights(std::span<float> weights);

  // Seconds the last step waited for reductions and the weight gather after
  // its backward: the communication the compute did not hide.
  double exposed_comm_seconds() const { return exposed_seconds_; }

 private:
  // Where bucket [begin, end)'s sum is formed: the model's grads (one
  // micro-batch per rank) or the accumulation buffer; `owned` is the part of
  // it this rank folds. Returns the span for the rank's own segment.
  std::span<float> SumSegment(int64_t begin, int64_t count);
  std::span<float> Accum();
  void StartBucket(size_t index);
  // Starts folding `grads` (laid out as `range` of the layout) into the sum:
  // this micro-batch's reduction of a bucket or a unit (done: a group of one).
  comm::Handle Reduce(const Bucket& range, std::span<const float> grads);
  // Each rank's part of bucket [begin, end): its fold segment.
  std::vector<int64_t> Segments(const Bucket& b) const;
  void WaitPending();
  bool by_units() const { return options_.zero >= 2; }

  comm::Group& group_;
  ThreadPool& pool_;
  DataParallelOptions options_;
  int64_t size_;
  std::span<float> grads_;
  AlignedBuffer accum_;  // the sum: [size] (ZeRO-0) or [shard] (ZeRO-1..3)
  std::vector<int64_t> unit_begins_;
  AlignedBuffer slots_[2];         // ZeRO-2/3: unit grads, [largest unit] each
  comm::Handle slot_reduced_[2];   // the reduction reading each slot
  int slot_ = 0;                   // the slot of the unit in backward
  int unit_ = -1;                  // the unit in backward
  std::vector<Bucket> buckets_;
  std::vector<int64_t> shard_counts_;  // elements per rank
  optim::Shard shard_;
  int micro_ = 0;
  int64_t frontier_ = 0;  // grads in [frontier_, size) are final for this micro-batch
  size_t next_bucket_ = 0;  // of this micro-batch
  std::vector<comm::Handle> pending_;
  double exposed_seconds_ = 0;
};

}  // namespace anvil::parallel
