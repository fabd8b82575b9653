// Files: whole-file reads, atomic writes (temp file, fsync,
// rename, fsync of the folder) and FNV-1a 64 checksums. Errors name the path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "anvil/core/status.h"

namespace anvil {

// The whole file. NotFound if it does not exist, IoError if it cannot be read.
Result<std::string> ReadFile(const std::string& path);

// Creates the folder and its parents if missing.
Status MakeDirectories(const std::string& path);

// A file that appears at `path` complete or not at all: bytes go to a temp
// file beside it, which Commit() syncs and renames over `path`. Dropped
// without Commit(), the temp file is removed and `path` is untouched.
class AtomicFile {
 public:
  static Result<AtomicFile> Create(const std::string& path);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  ~AtomicFile();

  Status Append(const void* data, size_t size);
  // Overwrites bytes already appended (e.g. a header written last).
  Status WriteAt(uint64_t offset, const void* data, size_t size);
  Status Commit();
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  AtomicFile(std::string path, std::string temp, int fd);
  Status Flush();

  std::string path_, temp_;
  int fd_ = -1;
  uint64_t size_ = 0;  // bytes appended, buffered ones included
  std::string buffer_;
};

Status WriteFileAtomic(const std::string& path, std::string_view contents);

inline constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnv1a64Prime = 0x100000001b3ull;

// FNV-1a 64 of `size` bytes, continuing from `hash` (chain calls to hash
// several regions as one).
uint64_t Fnv1a64(const void* data, size_t size, uint64_t hash = kFnv1a64Offset);

}  // namespace anvil
