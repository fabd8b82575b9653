// Flat shard files (see flat_shards.h).
#include "anvil/io/flat_shards.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

namespace anvil::io {

Status WriteFlatShard(const std::string& path, int64_t size, int64_t begin, int64_t end,
                      std::span<const FlatPart> parts,
                      std::map<std::string, std::string> metadata) {
  CHECK(0 <= begin && begin <= end && end <= size) << "shard [" << begin << ", " << end << ")";
  std::vector<TensorRef> tensors;
  for (const FlatPart& p : parts) tensors.push_back({p.name, DType::kF32, {end - begin}, p.data});
  metadata["size"] = std::to_string(size);
  metadata["shard_begin"] = std::to_string(begin);
  metadata["shard_end"] = std::to_string(end);
  return WriteSafetensors(path, tensors, metadata);
}

Result<int64_t> MetadataInt(const SafetensorsFile& file, const std::string& key,
                            std::optional<int64_t> fallback) {
  const auto it = file.metadata().find(key);
  if (it == file.metadata().end()) {
    if (fallback) return *fallback;
    return InvalidArgument(fmt::format("{}: metadata has no \"{}\"", file.path(), key));
  }
  try {
    size_t used = 0;
    const int64_t v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  return InvalidArgument(
      fmt::format("{}: metadata {} \"{}\" is not an integer", file.path(), key, it->second));
}

Status ReadFlatRange(std::span<const std::string> paths, int64_t size, int64_t begin, int64_t end,
                     std::span<const FlatTarget> targets,
                     const std::function<Status(const SafetensorsFile&)>& check) {
  if (paths.empty()) return InvalidArgument("no shard files to read");
  std::vector<std::pair<int64_t, int64_t>> pieces;  // the parts of [begin, end) restored
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(const SafetensorsFile file, SafetensorsFile::Read(path));
    if (check) RETURN_IF_ERROR(check(file));
    ASSIGN_OR_RETURN(const int64_t file_size, MetadataInt(file, "size", size));
    ASSIGN_OR_RETURN(const int64_t lo_file, MetadataInt(file, "shard_begin", 0));
    ASSIGN_OR_RETURN(const int64_t hi_file, MetadataInt(file, "shard_end", file_size));
    if (file_size != size) {
      return InvalidArgument(fmt::format("{}: state of a {}-element layout, this model has {}",
                                         path, file_size, size));
    }
    if (lo_file < 0 || lo_file > hi_file || hi_file > size) {
      return InvalidArgument(
          fmt::format("{}: shard [{}, {}) outside the layout", path, lo_file, hi_file));
    }
    const int64_t lo = std::max(lo_file, begin), hi = std::min(hi_file, end);
    for (const FlatTarget& t : targets) {
      ASSIGN_OR_RETURN(const void* data, file.Get(t.name, DType::kF32, {hi_file - lo_file}));
      if (lo < hi) {
        std::memcpy(t.out + (lo - begin), static_cast<const float*>(data) + (lo - lo_file),
                    static_cast<size_t>(hi - lo) * sizeof(float));
      }
    }
    if (lo < hi) pieces.emplace_back(lo, hi);
  }
  // The pieces must tile [begin, end): no gap, no overlap.
  std::sort(pieces.begin(), pieces.end());
  int64_t covered = 0, at = begin;
  bool tiled = true;
  for (const auto& [lo, hi] : pieces) {
    tiled &= lo == at;
    at = hi;
    covered += hi - lo;
  }
  if (!tiled || at != end) {
    return DataLoss(fmt::format(
        "shard files cover {} of the {} elements [{}, {}) needed, with gaps or overlaps "
        "(missing or overlapping shards; first file {})",
        covered, end - begin, begin, end, paths[0]));
  }
  return Status::Ok();
}

std::vector<std::string> ShardFiles(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.path().extension() == ".safetensors") {
      paths.push_back(e.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string ShardFileName(const std::string& prefix, int rank, int ranks) {
  return ranks == 1 ? prefix + ".safetensors"
                    : fmt::format("{}-{:05d}-of-{:05d}.safetensors", prefix, rank, ranks);
}

}  // namespace anvil::io
