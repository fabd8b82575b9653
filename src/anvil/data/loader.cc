// Window permutation, batch filling and document segments.
#include "anvil/data/loader.h"

#include <fmt/core.h>

#include <algorithm>

#include "anvil/core/check.h"
#include "anvil/core/rng.h"

namespace anvil::data {

Status LoaderConfig::Validate() const {
  if (batch_size < 1 || seq_len < 1) {
    return InvalidArgument(
        fmt::format("loader: batch size {} and sequence length {} must be "
                    "positive",
                    batch_size, seq_len));
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return InvalidArgument(
        fmt::format("loader: rank {} is not in [0, world size {})", rank, world_size));
  }
  return Status::Ok();
}

Loader::Loader(const TokenShard& shard, const LoaderConfig& config, uint64_t num_windows)
    : shard_(&shard),
      config_(config),
      num_windows_(num_windows),
      steps_per_epoch_(num_windows /
                       (static_cast<uint64_t>(config.batch_size) * config.world_size)) {}

Result<Loader> Loader::Create(const TokenShard& shard, const LoaderConfig& config,
                              LoaderPosition start) {
  RETURN_IF_ERROR(config.Validate());
  const uint64_t t = static_cast<uint64_t>(config.seq_len);
  const uint64_t windows = shard.num_tokens() > 0 ? (shard.num_tokens() - 1) / t : 0;
  const uint64_t global = static_cast<uint64_t>(config.batch_size) * config.world_size;
  if (windows < global) {
    return InvalidArgument(fmt::format(
        "{}: {} tokens give {} windows of {} tokens, fewer than one global batch of {} x {} "
        "ranks; use a smaller batch or sequence length, or more data",
        shard.path(), shard.num_tokens(), windows, t + 1, config.batch_size, config.world_size));
  }
  if (windows > UINT32_MAX) {
    return Unimplemented(
        fmt::format("{}: {} windows; the loader indexes at most 2^32", shard.path(), windows));
  }
  Loader loader(shard, config, windows);
  loader.Seek(start);
  return loader;
}

void Loader::Seek(LoaderPosition position) {
  CHECK_LT(position.step, steps_per_epoch_) << "loader position past the end of an epoch";
  position_ = position;
}

void Loader::MakePermutation(uint64_t epoch) {
  if (permutation_epoch_ == epoch) return;
  CHECK_LE(epoch, UINT32_MAX) << "epoch does not fit the RNG step field";
  permutation_.resize(num_windows_);
  for (uint64_t i = 0; i < num_windows_; ++i) permutation_[i] = static_cast<uint32_t>(i);
  // Fisher-Yates; j uniform in [0, i] by a 64x64 -> high-64 multiply (bias
  // below 2^-32), one Philox block per i. Rank 0's stream: every rank must
  // see the same permutation.
  const RngStream rng(config_.seed, RngPurpose::kDataOrder, static_cast<uint32_t>(epoch), 0);
  for (uint64_t i = num_windows_ - 1; i > 0; --i) {
    const PhiloxCounter block = rng.Block(i);
    const uint64_t r = uint64_t{block[0]} << 32 | block[1];
    const auto j = static_cast<uint64_t>((static_cast<unsigned __int128>(r) * (i + 1)) >> 64);
    std::swap(permutation_[i], permutation_[j]);
  }
  permutation_epoch_ = epoch;
}

uint64_t Loader::WindowAt(LoaderPosition position, int row) {
  CHECK(row >= 0 && row < config_.batch_size) << "row out of the batch";
  const uint64_t b = static_cast<uint64_t>(config_.batch_size);
  const uint64_t index =
      (position.step * config_.world_size + static_cast<uint64_t>(config_.rank)) * b + row;
  CHECK_LT(index, num_windows_) << "loader position past the end of an epoch";
  if (!config_.shuffle) return index;
  MakePermutation(position.epoch);
  return permutation_[index];
}

void Loader::Fill(LoaderPosition position, Batch* out) {
  const int bsz = config_.batch_size;
  const int t = config_.seq_len;
  out->batch_size = bsz;
  out->seq_len = t;
  out->position = position;
  out->tokens.resize(static_cast<size_t>(bsz) * (t + 1));
  out->positions.resize(static_cast<size_t>(bsz) * t);
  out->cu_seqlens.clear();
  out->cu_seqlens.reserve(static_cast<size_t>(bsz) * t + 1);
  out->cu_seqlens.push_back(0);
  out->max_seqlen = 0;
  for (int b = 0; b < bsz; ++b) {
    const uint64_t start = WindowAt(position, b) * static_cast<uint64_t>(t);
    shard_->CopyTokens(start, static_cast<uint64_t>(t) + 1, out->tokens.data() + b * (t + 1));
    int32_t* pos = out->positions.data() + static_cast<size_t>(b) * t;
    const int32_t row = b * t;
    int32_t segment = row;  // start of the current segment in the flat inputs
    if (config_.mode == BatchMode::kPacked) {
      uint64_t doc = shard_->DocOf(start);
      uint64_t next = shard_->DocStart(doc + 1);
      int32_t p = 0;
      for (int i = 0; i < t; ++i) {
        if (i > 0 && start + i == next) {  // a document starts here
          out->cu_seqlens.push_back(row + i);
          out->max_seqlen = std::max(out->max_seqlen, row + i - segment);
          segment = row + i;
          p = 0;
          next = shard_->DocStart(++doc + 1);
        }
        pos[i] = p++;
      }
    } else {
      for (int i = 0; i < t; ++i) pos[i] = i;
    }
    out->cu_seqlens.push_back(row + t);
    out->max_seqlen = std::max(out->max_seqlen, row + t - segment);
  }
}

const Batch& Loader::Next() {
  Fill(position_, &batch_);
  if (++position_.step == steps_per_epoch_) {
    position_.step = 0;
    ++position_.epoch;
  }
  return batch_;
}

}  // namespace anvil::data
