// DataParallel: accumulation, bucketed reduction and the ZeRO-1 shard (see
// data_parallel.h).
#include "anvil/parallel/data_parallel.h"

#include <algorithm>
#include <cstring>

#include "anvil/core/clock.h"
#include "anvil/profile/trace.h"

namespace anvil::parallel {

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

DataParallel::DataParallel(comm::Group& group, ThreadPool& pool, const DataParallelOptions& options,
                           std::span<float> grads, std::span<const int64_t> tensor_begins)
    : group_(group), pool_(pool), options_(options), grads_(grads) {
  CHECK(options.zero == 0 || options.zero == 1) << "ZeRO stage " << options.zero;
  CHECK_GE(options.grad_accum, 1);
  const int64_t n = static_cast<int64_t>(grads.size());
  buckets_ = PlanBuckets(tensor_begins, n, options.bucket_elements);
  shard_counts_ = options.zero == 1 ? comm::SplitEvenly(n, group.size(), optim::kNormChunk)
                                    : std::vector<int64_t>{};
  shard_ = {0, n};
  if (options.zero == 1) {
    int64_t begin = 0;
    for (int r = 0; r < group.rank(); ++r) begin += shard_counts_[r];
    shard_ = {begin, begin + shard_counts_[group.rank()]};
  }
  if (options.grad_accum > 1) {
    accum_ = AlignedBuffer(static_cast<size_t>(n) * sizeof(float));
    std::memset(accum_.data(), 0, accum_.size());  // first touch once, here
  }
}

std::span<float> DataParallel::Source() {
  if (options_.grad_accum == 1) return grads_;
  return {reinterpret_cast<float*>(accum_.data()), grads_.size()};
}

void DataParallel::BeginMicroBatch(int index) {
  CHECK(index >= 0 && index < options_.grad_accum) << "micro-batch " << index;
  CHECK(index == 0 || index == micro_ + 1) << "micro-batches must come in order";
  CHECK(index == 0 || frontier_ == 0) << "the previous micro-batch's backward did not finish";
  micro_ = index;
  frontier_ = static_cast<int64_t>(grads_.size());
  if (index == 0) {
    CHECK(pending_.empty()) << "FinishReduction was not called for the previous step";
    next_bucket_ = 0;
  }
}

void DataParallel::OnGradsReady(int64_t from) {
  CHECK(from >= 0 && from <= frontier_) << "grads ready from " << from << " after " << frontier_;
  if (options_.grad_accum > 1 && from < frontier_) {
    // acc = g0, then acc + g1, ...: the order one rank with more micro-batches
    // and N ranks folding the same micro-batches in rank order share.
    float* acc = Source().data();
    const float* g = grads_.data();
    const bool first = micro_ == 0;
    pool_.ParallelFor(frontier_ - from, [&](int64_t b, int64_t e, int) {
      if (first) {
        std::memcpy(acc + from + b, g + from + b, static_cast<size_t>(e - b) * sizeof(float));
      } else {
        for (int64_t i = from + b; i < from + e; ++i) acc[i] = acc[i] + g[i];
      }
    });
  }
  frontier_ = from;
  if (micro_ != options_.grad_accum - 1 || !options_.overlap) return;
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= frontier_) {
    StartBucket(next_bucket_++);
  }
}

void DataParallel::StartBucket(size_t index) {
  const Bucket& b = buckets_[index];
  const std::span<float> src = Source().subspan(b.begin, b.end - b.begin);
  if (options_.zero == 0) {
    pending_.push_back(group_.AllReduceAsync(src));
    return;
  }
  // Each rank receives the part of the bucket inside its shard.
  std::vector<int64_t> counts(group_.size());
  int64_t shard_begin = 0;
  for (int r = 0; r < group_.size(); ++r) {
    const int64_t lo = std::max(shard_begin, b.begin);
    const int64_t hi = std::min(shard_begin + shard_counts_[r], b.end);
    counts[r] = std::max<int64_t>(0, hi - lo);
    shard_begin += shard_counts_[r];
  }
  const int64_t mine_lo = std::clamp(shard_.begin, b.begin, b.end);
  pending_.push_back(group_.ReduceScatterAsync(
      std::span<const float>(src), Source().subspan(mine_lo, counts[group_.rank()]),
      std::span<const int64_t>(counts)));
}

std::span<const float> DataParallel::FinishReduction() {
  ANVIL_TRACE_ZONE("dp_reduce_wait");
  CHECK(micro_ == options_.grad_accum - 1 && frontier_ == 0)
      << "FinishReduction before the last micro-batch's backward finished";
  const Stopwatch watch;
  while (next_bucket_ < buckets_.size()) StartBucket(next_bucket_++);
  for (comm::Handle& h : pending_) h.Wait();
  pending_.clear();
  exposed_seconds_ = watch.Seconds();
  return Source();
}

double DataParallel::GradNorm(std::span<const float> reduced) {
  if (options_.zero == 0) return optim::GlobalNorm(pool_, reduced);
  const std::vector<double> mine =
      optim::ChunkSumsOfSquares(pool_, reduced.subspan(shard_.begin, shard_.size()));
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
  ANVIL_TRACE_ZONE("dp_gather_weights");
  const Stopwatch watch;
  group_.AllGather(std::span<const float>(weights.subspan(shard_.begin, shard_.size())), weights,
                   std::span<const int64_t>(shard_counts_));
  exposed_seconds_ += watch.Seconds();
}

}  // namespace anvil::parallel
