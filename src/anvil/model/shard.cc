// ShardInfo and BlockShape (see shard.h).
#include "anvil/model/shard.h"

#include <fmt/core.h>

#include <span>

namespace anvil::model {

void ShardInfo::AllReduce(float* data, int64_t n) const {
  if (size == 1) return;
  CHECK(group != nullptr && group->size() == size) << "tensor-parallel shard without its group";
  group->AllReduce(std::span<float>(data, static_cast<size_t>(n)));
}

Status CheckShardable(const ModelConfig& config, int tp) {
  if (tp < 1) return InvalidArgument(fmt::format("tensor-parallel degree {} must be >= 1", tp));
  auto check = [&](const char* key, int64_t value) -> Status {
    if (value % tp == 0) return Status::Ok();
    return InvalidArgument(fmt::format(
        "model.{} = {} is not divisible by the tensor-parallel degree {}: each rank takes an "
        "equal share; pick a degree that divides it",
        key, value, tp));
  };
  RETURN_IF_ERROR(check("n_heads", config.n_heads));
  RETURN_IF_ERROR(check("n_kv_heads", config.n_kv_heads));
  return check("ffn_dim", config.ffn_dim);
}

BlockShape BlockShape::Of(const ModelConfig& config, const ShardInfo& shard) {
  const Status ok = CheckShardable(config, shard.size);
  CHECK(ok.ok()) << ok.ToString();
  CHECK(shard.rank >= 0 && shard.rank < shard.size) << "tensor-parallel rank " << shard.rank;
  return {.dim = config.dim,
          .head_dim = config.head_dim(),
          .heads = config.n_heads / shard.size,
          .kv_heads = config.n_kv_heads / shard.size,
          .ffn = config.ffn_dim / shard.size,
          .norm_eps = config.norm_eps,
          .shard = shard};
}

}  // namespace anvil::model
