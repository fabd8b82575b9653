// Tensor parallelism as the model sees it (Megatron's split): each rank of the
// tensor-parallel group computes a slice of every layer, its share of the
// attention heads (q, k and v columns) and of the FFN columns (gate and up)
// for the column-parallel GEMMs, and the matching rows of wo and w_down for the
// row-parallel ones, whose partial outputs one all-reduce adds. The residual
// stream, the norms, the embedding and the head are whole on every rank.
//
// The blocks read their sizes from a BlockShape (this rank's heads and FFN
// columns), never from ModelConfig, so the same code runs at any degree; with
// one rank (the default) every collective is skipped and every result is the
// one-process result bit for bit.
#pragma once

#include <cstdint>

#include "anvil/comm/group.h"
#include "anvil/core/status.h"
#include "anvil/model/config.h"

namespace anvil::model {

// This rank's place in the tensor-parallel group.
struct ShardInfo {
  int rank = 0;
  int size = 1;
  comm::Group* group = nullptr;  // the tensor-parallel group; may be null when size == 1

  static ShardInfo Of(comm::Group& tp) { return {tp.rank(), tp.size(), &tp}; }
  // data[0, n) = the sum over the group's ranks, folded in rank order
  // ((r0 + r1) + r2 ...); nothing with one rank.
  void AllReduce(float* data, int64_t n) const;
};

// "model.n_heads ... is not divisible by the tensor-parallel degree": the
// config can be split `tp` ways (heads, kv heads and FFN columns evenly).
Status CheckShardable(const ModelConfig& config, int tp);

// A layer's sizes on one tensor-parallel rank.
struct BlockShape {
  int64_t dim = 0;       // C (whole on every rank)
  int64_t head_dim = 0;  // HD
  int64_t heads = 0;     // NH / tp: this rank's query heads
  int64_t kv_heads = 0;  // NKV / tp
  int64_t ffn = 0;       // F / tp: this rank's gate (and up) columns
  double norm_eps = 0;
  ShardInfo shard;

  int64_t q() const { return heads * head_dim; }      // this rank's q columns, wo rows
  int64_t kv() const { return kv_heads * head_dim; }  // its k (and v) columns
  int64_t qkv() const { return q() + 2 * kv(); }      // its fused q|k|v columns

  // CHECKs that `config` splits shard.size ways (CheckShardable).
  static BlockShape Of(const ModelConfig& config, const ShardInfo& shard);
};

}  // namespace anvil::model
