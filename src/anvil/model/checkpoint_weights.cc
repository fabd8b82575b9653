// A checkpoint's weights, whole or sharded (see checkpoint_weights.h).
#include "anvil/model/checkpoint_weights.h"

#include <algorithm>
#include <filesystem>

#include "anvil/io/flat_shards.h"
#include "anvil/model/hf_checkpoint.h"

namespace anvil::model {
namespace {

constexpr char kWeightsTensor[] = "weights";

bool HasWeightShards(const std::string& dir) {
  return !std::filesystem::exists(dir + "/model.safetensors") &&
         !io::ShardFiles(dir, kWeightShardPrefix).empty();
}

}  // namespace

Status SaveWeightShard(const std::string& dir, int rank, int ranks, int64_t size, int64_t begin,
                       int64_t end, const float* weights) {
  const io::FlatPart parts[] = {{kWeightsTensor, weights}};
  return io::WriteFlatShard(dir + "/" + io::ShardFileName(kWeightShardPrefix, rank, ranks), size,
                            begin, end, parts, {{"layout", "anvil flat parameter buffer"}});
}

Status LoadCheckpointWeights(const std::string& dir, LlamaParams& params) {
  CHECK(params.shard().size == 1 && params.stage().first_layer == 0 &&
        params.stage().has_head(params.config()))
      << "checkpoint weights load into a whole model (one tp rank, every layer)";
  if (!HasWeightShards(dir)) return LoadHfCheckpoint(dir, params);
  return LoadCheckpointWeightRange(dir, params.config(), 0, params.size(), params.weights().data());
}

Status LoadCheckpointWeightRange(const std::string& dir, const ModelConfig& config, int64_t begin,
                                 int64_t end, float* out) {
  if (HasWeightShards(dir)) {
    RETURN_IF_ERROR(CheckHfConfig(dir, config));
    int64_t size = 0;
    LlamaParams::Layout(config, &size);
    const io::FlatTarget target[] = {{kWeightsTensor, out}};
    return io::ReadFlatRange(io::ShardFiles(dir, kWeightShardPrefix), size, begin, end, target);
  }
  // A whole file: read it whole, keep the range.
  LlamaParams whole(config, /*with_bf16=*/false, ParamBuffers{.weights = true, .grads = false});
  RETURN_IF_ERROR(LoadHfCheckpoint(dir, whole));
  CHECK(0 <= begin && begin <= end && end <= whole.size())
      << "range [" << begin << ", " << end << ")";
  std::copy(whole.weights().begin() + begin, whole.weights().begin() + end, out);
  return Status::Ok();
}

}  // namespace anvil::model
