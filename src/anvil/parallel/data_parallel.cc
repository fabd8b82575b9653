// DataParallel: accumulation, bucketed reduction and the ZeRO-1 shard (see
// data_parallel.h).
#include "anvil/parallel/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "anvil/core/clock.h"
#include "anvil/profile/trace.h"

namespace anvil::parallel {

optim::Shard ShardOf(std::span<const int64_t> counts, int rank) {
  int64_t begin = 0;
  for (int r = 0; r < rank; ++r) begin += counts[r];
  return {begin, begin + counts[rank]};
}

std::vector<int64_t> OverlapCounts(std::span<const int64_t> counts, int64_t begin, int64_t end) {
  std::vector<int64_t> overlap(counts.size());
  int64_t shard_begin = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    const int64_t lo = std::max(shard_begin, begin), hi = std::min(shard_begin + counts[r], end);
    overlap[r] = std::max<int64_t>(0, hi - lo);
    shard_begin += counts[r];
  }
  return overlap;
}

std::vector<Bucket> PlanBuckets(std::span<const int64_t> tensor_begins, int64_t size,
                                int64_t bucket_elements) {
  CHECK(!tensor_begins.empty() && tensor_begins.front() == 0) << "tensor offsets must start at 0";
  CHECK_GT(bucket_elements, 0);
  std::vector<Bucket> buckets;
  int64_t end = size;
  for (size_t i = tensor_begins.size(); i-- > 0;) {
    const int64_t begin = tensor_begins[i];
    CHECK_LE(begin, end) << "tensor offsets must ascend";
    if (end - begin >= bucket_elements || i == 0) {
      buckets.push_back({begin, end});
      end = begin;
    }
  }
  return buckets;
}

std::vector<int64_t> ZeroShardCounts(int64_t size, int ranks) {
  return comm::SplitEvenly(size, ranks, optim::kNormChunk);
}

DataParallel::DataParallel(comm::Group& group, ThreadPool& pool, const DataParallelOptions& options,
                           int64_t size, std::span<float> grads,
                           std::span<const int64_t> tensor_begins,
                           std::span<const int64_t> unit_begins)
    : group_(group),
      pool_(pool),
      options_(options),
      size_(size),
      grads_(grads),
      unit_begins_(unit_begins.begin(), unit_begins.end()) {
  CHECK(options.zero >= 0 && options.zero <= 3) << "ZeRO stage " << options.zero;
  CHECK_GE(options.grad_accum, 1);
  CHECK(by_units() ? grads.empty() : static_cast<int64_t>(grads.size()) == size)
      << "the model's grad buffer: whole below ZeRO-2, none from it";
  buckets_ = PlanBuckets(tensor_begins, size, options.bucket_elements);
  shard_counts_ = options.zero >= 1 ? ZeroShardCounts(size, group.size()) : std::vector<int64_t>{};
  shard_ = options.zero >= 1 ? ShardOf(shard_counts_, group.rank()) : optim::Shard{0, size};
  // The sum: in the model's grads when they are whole and there is one
  // micro-batch; else here (ZeRO-0's is gathered whole into it).
  if (options.grad_accum > 1 || by_units()) {
    accum_ = AlignedBuffer(static_cast<size_t>(options.zero == 0 ? size : shard_.size()) * sizeof(float));
    accum_.Zero();  // first touch once, here (empty for a rank that owns nothing)
  }
  if (by_units()) {
    CHECK(unit_begins_.size() >= 2 && unit_begins_.front() == 0 && unit_begins_.back() == size)
        << "unit offsets";
    int64_t largest = 0;
    for (size_t u = 0; u + 1 < unit_begins_.size(); ++u) {
      largest = std::max(largest, unit_begins_[u + 1] - unit_begins_[u]);
    }
    for (AlignedBuffer& slot : slots_) {
      slot = AlignedBuffer(static_cast<size_t>(largest) * sizeof(float));
      slot.Zero();
    }
  }
}

std::span<float> DataParallel::Accum() {
  return {reinterpret_cast<float*>(accum_.data()), accum_.size() / sizeof(float)};
}

std::span<float> DataParallel::SumSegment(int64_t begin, int64_t count) {
  if (options_.grad_accum == 1 && !by_units()) return grads_.subspan(begin, count);
  if (count == 0) return {};  // a bucket outside this rank's shard
  // ZeRO-1's accumulation buffer holds the shard alone.
  const int64_t base = options_.zero == 0 ? 0 : shard_.begin;
  CHECK(begin >= base && begin - base + count <= static_cast<int64_t>(Accum().size()));
  return Accum().subspan(begin - base, count);
}

void DataParallel::WaitPending() {
  for (comm::Handle& h : pending_) h.Wait();
  pending_.clear();
}

void DataParallel::BeginMicroBatch(int index) {
  CHECK(index >= 0 && index < options_.grad_accum) << "micro-batch " << index;
  CHECK(index == 0 || (index == micro_ + 1 && frontier_ == 0))
      << "micro-batches must come in order, each after the previous one's backward";
  CHECK(index > 0 || pending_.empty()) << "FinishReduction was not called for the previous step";
  if (index > 0) {
    ANVIL_TRACE_ZONE("dp_reduce_wait");
    const Stopwatch watch;
    WaitPending();
    exposed_seconds_ += watch.Seconds();
  } else {
    exposed_seconds_ = 0;
  }
  micro_ = index;
  frontier_ = size_;
  next_bucket_ = 0;
}

float* DataParallel::BeginUnitBackward(int unit) {
  CHECK(by_units()) << "unit slots are for ZeRO-2/3";
  CHECK(unit >= 0 && unit + 1 < static_cast<int>(unit_begins_.size())) << "unit " << unit;
  slot_ ^= 1;
  {
    ANVIL_TRACE_ZONE("dp_slot_wait");  // the reduction of the unit two back
    const Stopwatch watch;
    slot_reduced_[slot_].Wait();
    exposed_seconds_ += watch.Seconds();
  }
  unit_ = unit;
  float* slot = reinterpret_cast<float*>(slots_[slot_].data());
  const int64_t count = unit_begins_[unit + 1] - unit_begins_[unit];
  pool_.ParallelFor(count, [&](int64_t lo, int64_t hi, int) {
    std::memset(slot + lo, 0, static_cast<size_t>(hi - lo) * sizeof(float));
  });
  return slot;
}

void DataParallel::OnGradsReady(int64_t from) {
  CHECK(from >= 0 && from <= frontier_) << "grads ready from " << from << " after " << frontier_;
  frontier_ = from;
  if (by_units()) {  // the unit in the slot is done: fold it into the shards' sums
    CHECK(unit_ >= 0 && from == unit_begins_[unit_]) << "grads ready from " << from
                                                      << " but unit " << unit_ << " is in backward";
    const Bucket unit{unit_begins_[unit_], unit_begins_[unit_ + 1]};
    slot_reduced_[slot_] = Reduce(unit, {reinterpret_cast<const float*>(slots_[slot_].data()),
                                         static_cast<size_t>(unit.end - unit.begin)});
    pending_.push_back(slot_reduced_[slot_]);
    unit_ = -1;
    return;
  }
  // Without overlap every bucket starts once the whole backward is done.
  if (!options_.overlap && frontier_ > 0) return;
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= frontier_) {
    StartBucket(next_bucket_++);
  }
}

std::vector<int64_t> DataParallel::Segments(const Bucket& b) const {
  if (options_.zero == 0) return comm::AllReduceSegments(b.end - b.begin, group_.size());
  return OverlapCounts(shard_counts_, b.begin, b.end);
}

void DataParallel::StartBucket(size_t index) {
  const Bucket& b = buckets_[index];
  pending_.push_back(Reduce(b, grads_.subspan(b.begin, b.end - b.begin)));
}

comm::Handle DataParallel::Reduce(const Bucket& range, std::span<const float> grads) {
  const bool last = micro_ == options_.grad_accum - 1, accumulate = micro_ > 0;
  if (group_.size() == 1) {
    // One process: the fold of one rank is the sum so far plus this
    // micro-batch (the same bits a group of one gives), on every thread.
    if (options_.grad_accum == 1 && !by_units()) return {};  // the grads are the sum
    float* sum = SumSegment(range.begin, range.end - range.begin).data();
    const float* g = grads.data();
    pool_.ParallelFor(range.end - range.begin, [&](int64_t lo, int64_t hi, int) {
      if (!accumulate) {
        std::memcpy(sum + lo, g + lo, static_cast<size_t>(hi - lo) * sizeof(float));
      } else {
        for (int64_t i = lo; i < hi; ++i) sum[i] = sum[i] + g[i];
      }
    });
    return {};
  }
  if (options_.zero == 0 && last) {  // the whole summed gradient on every rank
    const std::span<float> sum = SumSegment(range.begin, range.end - range.begin);
    return options_.grad_accum == 1
               ? group_.AllReduceAsync(sum)
               : group_.AllReduceAsync(grads, sum, comm::ReduceOp::kSum, accumulate);
  }
  // Each rank folds its segment of the range into the sum.
  const std::vector<int64_t> counts = Segments(range);
  int64_t mine = range.begin;
  for (int r = 0; r < group_.rank(); ++r) mine += counts[r];
  return group_.ReduceScatterAsync(grads, SumSegment(mine, counts[group_.rank()]),
                                   std::span<const int64_t>(counts), comm::ReduceOp::kSum,
                                   accumulate);
}

std::span<const float> DataParallel::FinishReduction() {
  ANVIL_TRACE_ZONE("dp_reduce_wait");
  CHECK(micro_ == options_.grad_accum - 1 && frontier_ == 0 &&
        (by_units() || next_bucket_ == buckets_.size()))
      << "FinishReduction before the last micro-batch's backward finished";
  const Stopwatch watch;
  WaitPending();
  exposed_seconds_ += watch.Seconds();
  if (options_.grad_accum == 1 && !by_units()) return grads_;
  return Accum();
}

double DataParallel::GradNorm(std::span<const float> reduced) {
  if (options_.zero == 0) return optim::GlobalNorm(pool_, reduced);
  const std::span<const float> own = static_cast<int64_t>(reduced.size()) == size_
                                         ? reduced.subspan(shard_.begin, shard_.size())
                                         : reduced;
  CHECK_EQ(static_cast<int64_t>(own.size()), shard_.size()) << "reduced grads";
  const std::vector<double> mine = optim::ChunkSumsOfSquares(pool_, own);
  std::vector<int64_t> counts(group_.size());
  int64_t total = 0;
  for (int r = 0; r < group_.size(); ++r) {
    counts[r] = (shard_counts_[r] + optim::kNormChunk - 1) / optim::kNormChunk;
    total += counts[r];
  }
  std::vector<double> all(total);
  group_.AllGather(std::span<const double>(mine), std::span<double>(all),
                   std::span<const int64_t>(counts));
  return optim::NormFromChunkSums(all);
}

void DataParallel::GatherWeights(std::span<float> weights) {
  if (options_.zero == 0) return;
  CHECK_NE(options_.zero, 3) << "ZeRO-3 gathers weights unit by unit (weight_gather.h)";
  ANVIL_TRACE_ZONE("dp_gather_weights");
  const Stopwatch watch;
  group_.AllGather(std::span<const float>(weights.subspan(shard_.begin, shard_.size())), weights,
                   std::span<const int64_t>(shard_counts_));
  exposed_seconds_ += watch.Seconds();
}

}  // namespace anvil::parallel
