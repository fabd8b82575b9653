// ZeRO-3's weights: each rank keeps only its shard of the f32 master weights
// (the optimizer updates it in place); a unit (embedding, layer, head) is
// all-gathered whole just before the model uses it, into one of two slots,
// while the next unit's gather is already in flight (prefetch). A unit still
// in a slot is not gathered again (the last layer's forward and backward
// meet around the head). In bf16 precision the slot's bf16 copy is rounded
// from the gathered f32, as the whole-buffer copy would be: same bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/core/cpu_features.h"
#include "anvil/core/thread_pool.h"
#include "anvil/optim/adamw.h"

namespace anvil::parallel {

class WeightGather {
 public:
  // `unit_begins`: the units' first offsets with the layout's size last;
  // `shard_counts`: elements per rank of the sharding (DataParallel's).
  WeightGather(comm::Group& group, ThreadPool& pool, Isa isa, std::span<const int64_t> unit_begins,
               std::span<const int64_t> shard_counts, bool bf16);

  // This rank's shard of the master weights.
  std::span<float> master() {
    return {reinterpret_cast<float*>(master_.data()), static_cast<size_t>(shard_.size())};
  }
  const optim::Shard& shard() const { return shard_; }

  struct UnitWeights {
    const float* f32 = nullptr;  // laid out as the unit's range of the layout
    const BF16* bf16 = nullptr;  // null in f32
  };
  // Unit `unit`'s weights, whole; then starts gathering `next` (-1: none)
  // into the other slot. The slot of the unit returned before must be free.
  UnitWeights Acquire(int unit, int next);
  // Waits for gathers in flight and forgets the slots: the master changed.
  void Invalidate();

  int64_t allocated_bytes() const;
  // Gathers started so far (prefetches included).
  int64_t gathers_started() const { return gathers_started_; }
  // Seconds waited for gathers since the last call.
  double TakeWaitSeconds();

 private:
  void StartGather(int slot, int unit);

  comm::Group& group_;
  ThreadPool& pool_;
  Isa isa_;
  std::vector<int64_t> unit_begins_;
  std::vector<int64_t> shard_counts_;
  optim::Shard shard_;
  bool bf16_;
  AlignedBuffer master_;
  struct Slot {
    AlignedBuffer f32, bf16;
    int unit = -1;           // gathered or being gathered into it
    bool rounded = false;    // bf16 copy made
    comm::Handle gathered;
  };
  Slot slots_[2];
  int current_ = 0;  // the slot of the unit last returned
  int64_t gathers_started_ = 0;
  double waited_ = 0;
};

}  // namespace anvil::parallel
