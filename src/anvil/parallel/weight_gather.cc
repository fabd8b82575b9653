// WeightGather (see weight_gather.h).
#include "anvil/parallel/weight_gather.h"

#include <algorithm>
#include <cstring>

#include "anvil/core/clock.h"
#include "anvil/core/convert.h"
#include "anvil/parallel/data_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::parallel {

WeightGather::WeightGather(comm::Group& group, ThreadPool& pool, Isa isa,
                           std::span<const int64_t> unit_begins,
                           std::span<const int64_t> shard_counts, bool bf16)
    : group_(group),
      pool_(pool),
      isa_(isa),
      unit_begins_(unit_begins.begin(), unit_begins.end()),
      shard_counts_(shard_counts.begin(), shard_counts.end()),
      bf16_(bf16) {
  CHECK_EQ(static_cast<int>(shard_counts_.size()), group.size()) << "shard counts";
  shard_ = ShardOf(shard_counts_, group.rank());
  master_ = AlignedBuffer(static_cast<size_t>(shard_.size()) * sizeof(float));
  int64_t largest = 0;
  for (size_t u = 0; u + 1 < unit_begins_.size(); ++u) {
    largest = std::max(largest, unit_begins_[u + 1] - unit_begins_[u]);
  }
  for (Slot& s : slots_) {  // touched once, here
    s.f32 = AlignedBuffer(static_cast<size_t>(largest) * sizeof(float));
    s.f32.Zero();
    if (bf16) {
      s.bf16 = AlignedBuffer(static_cast<size_t>(largest) * sizeof(BF16));
      s.bf16.Zero();
    }
  }
}

int64_t WeightGather::allocated_bytes() const {
  int64_t bytes = static_cast<int64_t>(master_.size());
  for (const Slot& s : slots_) bytes += static_cast<int64_t>(s.f32.size() + s.bf16.size());
  return bytes;
}

void WeightGather::StartGather(int slot, int unit) {
  Slot& s = slots_[slot];
  const int64_t begin = unit_begins_[unit], end = unit_begins_[unit + 1];
  // Each rank gives the part of the unit inside its shard.
  const std::vector<int64_t> counts = OverlapCounts(shard_counts_, begin, end);
  const int64_t mine = counts[group_.rank()];
  const float* from = mine > 0 ? master().data() + (std::max(begin, shard_.begin) - shard_.begin) : nullptr;
  s.unit = unit;
  s.rounded = false;
  ++gathers_started_;
  s.gathered = group_.AllGatherAsync(
      std::span<const float>(from, static_cast<size_t>(mine)),
      std::span<float>(reinterpret_cast<float*>(s.f32.data()), static_cast<size_t>(end - begin)),
      std::span<const int64_t>(counts));
}

WeightGather::UnitWeights WeightGather::Acquire(int unit, int next) {
  CHECK(unit >= 0 && unit + 1 < static_cast<int>(unit_begins_.size())) << "unit " << unit;
  int slot = slots_[0].unit == unit ? 0 : slots_[1].unit == unit ? 1 : -1;
  if (slot < 0) {  // not prefetched: into the slot not holding the unit in use
    slot = current_ ^ 1;
    slots_[slot].gathered.Wait();
    StartGather(slot, unit);
  }
  Slot& s = slots_[slot];
  {
    ANVIL_TRACE_ZONE("zero3_gather_wait");
    const Stopwatch watch;
    s.gathered.Wait();
    waited_ += watch.Seconds();
  }
  const int64_t count = unit_begins_[unit + 1] - unit_begins_[unit];
  if (bf16_ && !s.rounded) {
    const float* f = reinterpret_cast<const float*>(s.f32.data());
    auto* b = reinterpret_cast<uint16_t*>(s.bf16.data());
    constexpr int64_t kChunk = 1 << 14;
    pool_.ParallelFor((count + kChunk - 1) / kChunk, [&](int64_t lo, int64_t hi, int) {
      const int64_t from = lo * kChunk, to = std::min(count, hi * kChunk);
      F32ToBF16(isa_, std::span<const float>(f + from, to - from), std::span<uint16_t>(b + from, to - from));
    });
    s.rounded = true;
  }
  current_ = slot;
  // Prefetch into the other slot (its unit, the one before, is done).
  if (next >= 0 && slots_[slot ^ 1].unit != next) {
    slots_[slot ^ 1].gathered.Wait();
    StartGather(slot ^ 1, next);
  }
  return {reinterpret_cast<const float*>(s.f32.data()),
          bf16_ ? reinterpret_cast<const BF16*>(s.bf16.data()) : nullptr};
}

void WeightGather::Invalidate() {
  for (Slot& s : slots_) {
    s.gathered.Wait();
    s.unit = -1;
    s.rounded = false;
  }
}

double WeightGather::TakeWaitSeconds() {
  const double w = waited_;
  waited_ = 0;
  return w;
}

}  // namespace anvil::parallel
