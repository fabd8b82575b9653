// The weights of a checkpoint folder, in either of the two forms a run writes:
// model.safetensors (Hugging Face Llama names, whole: one process, or data
// parallelism without sharding) or weights-RRRRR-of-NNNNN.safetensors (flat
// shards of the parameter layout, io/flat_shards.h, one written by each rank
// of a ZeRO run in parallel). Either loads whole or as any range of the flat
// layout, so a checkpoint continues under any layout. config.json (HF) is in
// both forms and must describe the model.
#pragma once

#include <cstdint>
#include <string>

#include "anvil/core/status.h"
#include "anvil/model/weights.h"

namespace anvil::model {

inline constexpr char kWeightShardPrefix[] = "weights";

// This rank's flat range [begin, end) of the weights as
// dir/weights-RRRRR-of-NNNNN.safetensors.
Status SaveWeightShard(const std::string& dir, int rank, int ranks, int64_t size, int64_t begin,
                       int64_t end, const float* weights);

// The whole master weights (not the bf16 shadow: call RefreshBf16 after).
Status LoadCheckpointWeights(const std::string& dir, LlamaParams& params);

// Elements [begin, end) of the flat layout of `config` into out[0, end - begin).
Status LoadCheckpointWeightRange(const std::string& dir, const ModelConfig& config, int64_t begin,
                                 int64_t end, float* out);

}  // namespace anvil::model
