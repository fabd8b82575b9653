// Batches of token windows from a shard, as a pure function of (shard, seed,
// epoch, step, rank, world_size): resuming from a saved LoaderPosition gives
// exactly the batches an uninterrupted run would, and data-parallel ranks get
// disjoint windows.
//
// Windows: the shard's token stream (documents back to back, each
// bos ... eos) is cut into K = (num_tokens - 1) / T windows of T + 1 tokens,
// window k starting at k * T (inputs [k*T, k*T+T), targets one later; the
// tail that fills no window is unused). Each epoch visits a permutation of the
// K windows (Fisher-Yates driven by RngStream(seed, kDataOrder, step = epoch);
// identity without shuffle). Global step s takes permuted windows
// [s*B*W, (s+1)*B*W); rank r gets the r-th block of B. An epoch has
// floor(K / (B*W)) steps; the remainder waits for the next permutation.
//
// Packed mode uses the same windows and splits each row at document starts:
// cu_seqlens marks the segments for attention and positions restart at 0 in
// each (a row that begins mid-document starts at 0 too). In windows mode each
// row is one segment with positions 0..T-1.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/data/shard.h"

namespace anvil::data {

enum class BatchMode { kWindows, kPacked };

struct LoaderConfig {
  int batch_size = 8;  // B: rows per rank
  int seq_len = 256;   // T: inputs per row
  BatchMode mode = BatchMode::kWindows;
  bool shuffle = true;  // false: windows in order (validation)
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;

  Status Validate() const;
  // The same shape over the validation split: windows in order, no shuffle.
  // Ranks split each step's windows as in training; the remainder of
  // K mod (B * world_size) windows is not evaluated.
  LoaderConfig ForValidation() const {
    LoaderConfig c = *this;
    c.shuffle = false;
    return c;
  }
};

// Where a loader stands: the next batch is step `step` of epoch `epoch`. This
// is what a checkpoint saves.
struct LoaderPosition {
  uint64_t epoch = 0;
  uint64_t step = 0;
  bool operator==(const LoaderPosition&) const = default;
};

struct Batch {
  int batch_size = 0;
  int seq_len = 0;
  LoaderPosition position;          // which batch this is
  std::vector<int32_t> tokens;      // [B, T+1]: inputs [:, :T], targets [:, 1:]
  std::vector<int32_t> positions;   // [B, T]: position of each input in its document segment
  std::vector<int32_t> cu_seqlens;  // [segments + 1]: segment offsets into the flat [B*T] inputs
  int32_t max_seqlen = 0;           // longest segment

  std::span<const int32_t> Inputs(int b) const {
    return {tokens.data() + static_cast<size_t>(b) * (seq_len + 1), static_cast<size_t>(seq_len)};
  }
  std::span<const int32_t> Targets(int b) const {
    return {tokens.data() + static_cast<size_t>(b) * (seq_len + 1) + 1,
            static_cast<size_t>(seq_len)};
  }
};

class Loader {
 public:
  // The shard must outlive the loader. Fails if the shard holds fewer than one
  // global batch (B * world_size windows of T + 1 tokens).
  static Result<Loader> Create(const TokenShard& shard, const LoaderConfig& config,
                               LoaderPosition start = {});

  const LoaderConfig& config() const { return config_; }
  uint64_t num_windows() const { return num_windows_; }
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }

  // The position of the batch Next() returns next.
  LoaderPosition position() const { return position_; }
  void Seek(LoaderPosition position);

  // The batch at position(); then advances (to the next epoch after the last step).
  const Batch& Next();
  // The batch at `position` (no state but a cached permutation changes).
  void Fill(LoaderPosition position, Batch* out);
  // The window (start = window * T) in row `row` of this rank at `position`.
  uint64_t WindowAt(LoaderPosition position, int row);

 private:
  Loader(const TokenShard& shard, const LoaderConfig& config, uint64_t num_windows);
  void MakePermutation(uint64_t epoch);

  const TokenShard* shard_;
  LoaderConfig config_;
  uint64_t num_windows_;
  uint64_t steps_per_epoch_;
  LoaderPosition position_;
  Batch batch_;
  uint64_t permutation_epoch_ = ~uint64_t{0};
  std::vector<uint32_t> permutation_;
};

}  // namespace anvil::data
