// Flat shard files: a range [begin, end) of flat buffers of `size` elements
// (the parameter layout: weights, Adam moments), one safetensors file per
// range, each buffer a 1-D f32 tensor of end - begin elements, with metadata
// "size", "shard_begin" and "shard_end" (absent: the whole buffer) beside the
// caller's own. Written by each rank in parallel; read back into any other
// cut of the layout, so a checkpoint reshards on load.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/io/safetensors.h"

namespace anvil::io {

// One buffer's part to write, or where to read one into.
struct FlatPart {
  std::string name;  // the tensor's name in the file ("weights", "m", "v")
  const float* data = nullptr;
};
struct FlatTarget {
  std::string name;
  float* out = nullptr;  // [end - begin) of the range read
};

// Writes the parts [begin, end) of `size`-element buffers to `path`
// (atomically), with `metadata` added.
Status WriteFlatShard(const std::string& path, int64_t size, int64_t begin, int64_t end,
                      std::span<const FlatPart> parts, std::map<std::string, std::string> metadata);

// Fills [begin, end) of each target from the shard files `paths` (any cut of
// the same `size`-element layout, none overlapping); DataLoss naming the gap
// when they do not cover the range. `check(file)` runs first on every file
// (the caller's metadata checks).
Status ReadFlatRange(std::span<const std::string> paths, int64_t size, int64_t begin, int64_t end,
                     std::span<const FlatTarget> targets,
                     const std::function<Status(const SafetensorsFile&)>& check = nullptr);

// The integer metadata value `key` of `file`, else `fallback`, else an error
// naming the file and the key.
Result<int64_t> MetadataInt(const SafetensorsFile& file, const std::string& key,
                            std::optional<int64_t> fallback);

// The files of `dir` whose names start with `prefix` and end in .safetensors,
// sorted ("optimizer" finds optimizer.safetensors and optimizer-00001-of-00004...).
std::vector<std::string> ShardFiles(const std::string& dir, const std::string& prefix);

// "optimizer.safetensors" for one file, else "optimizer-00001-of-00004.safetensors".
std::string ShardFileName(const std::string& prefix, int rank, int ranks);

}  // namespace anvil::io
