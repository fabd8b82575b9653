// A checkpoint's weights, whole or sharded (see checkpoint_weights.h).
#include "anvil/model/checkpoint_weights.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "anvil/core/file_util.h"
#include "anvil/io/checkpoint.h"
#include "anvil/io/flat_shards.h"
#include "anvil/model/hf_checkpoint.h"

namespace anvil::model {
namespace {

constexpr char kWeightsTensor[] = "weights";

bool HasWeightShards(const std::string& dir) {
  return !std::filesystem::exists(dir + "/model.safetensors") &&
         !io::ShardFiles(dir, kWeightShardPrefix).empty();
}

// The checksum of a weights file, read a MiB at a time.
Result<std::string> WeightsFileId(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (f == nullptr) return NotFound(fmt::format("{}: cannot open", path));
  std::vector<char> buffer(size_t{1} << 20);
  uint64_t hash = kFnv1a64Offset;
  for (size_t got; (got = std::fread(buffer.data(), 1, buffer.size(), f.get())) > 0;) {
    hash = Fnv1a64(buffer.data(), got, hash);
  }
  if (std::ferror(f.get())) return IoError(fmt::format("{}: read error", path));
  return fmt::format("{:016x}", hash);
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

Result<std::string> CheckpointWeightsId(const std::string& dir) {
  const std::string path = dir + "/" + io::kManifestFile;
  if (!std::filesystem::exists(path)) return WeightsFileId(dir + "/model.safetensors");
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  ASSIGN_OR_RETURN(const io::CheckpointManifest manifest, io::ParseCheckpointManifest(text, path));
  const bool sharded = HasWeightShards(dir);
  std::string listed;
  for (const io::CheckpointManifest::File& f : manifest.files) {
    if (sharded ? f.name.starts_with(std::string(kWeightShardPrefix) + "-")
                : f.name == "model.safetensors") {
      listed += f.name + " " + f.fnv1a64 + "\n";
    }
  }
  if (listed.empty()) return NotFound(fmt::format("{}: lists no weight files", path));
  return fmt::format("{:016x}", Fnv1a64(listed.data(), listed.size()));
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
