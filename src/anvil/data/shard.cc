// Shard writing (streamed, checksummed as written) and validated mmap reading.
#include "anvil/data/shard.h"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "anvil/core/check.h"

namespace anvil::data {
namespace {

// The format is little-endian and we copy fields with memcpy.
static_assert(std::endian::native == std::endian::little, "shards assume a little-endian host");

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t token_bytes;
  uint32_t vocab_size;
  uint32_t header_bytes;
  uint64_t num_tokens;
  uint64_t num_docs;
  uint64_t payload_checksum;
  uint64_t reserved;
  uint64_t header_checksum;
};
static_assert(sizeof(Header) == kShardHeaderBytes);
constexpr size_t kHeaderChecksumOffset = offsetof(Header, header_checksum);

uint64_t TokensRegionBytes(uint64_t num_tokens, int token_bytes) {
  return (num_tokens * token_bytes + 7) / 8 * 8;
}

const char* kRerun = "re-run `anvil prepare`";

Status Truncated(const std::string& path, uint64_t size) {
  return DataLoss(fmt::format("{}: truncated: {} bytes, shorter than the {}-byte header; {}", path,
                              size, kShardHeaderBytes, kRerun));
}

}  // namespace

ShardWriter::ShardWriter(AtomicFile file, uint32_t vocab_size)
    : file_(std::move(file)), vocab_size_(vocab_size), token_bytes_(vocab_size <= 65536 ? 2 : 4) {}

Result<ShardWriter> ShardWriter::Create(const std::string& path, uint32_t vocab_size) {
  if (vocab_size == 0) return InvalidArgument(fmt::format("{}: vocab size must be positive", path));
  ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  const Header placeholder{};  // the real header is written by Finish()
  RETURN_IF_ERROR(file.Append(&placeholder, sizeof(placeholder)));
  return ShardWriter(std::move(file), vocab_size);
}

Status ShardWriter::AppendPayload(const void* data, size_t size) {
  checksum_ = Fnv1a64(data, size, checksum_);
  return file_.Append(data, size);
}

Status ShardWriter::AddDocument(std::span<const uint32_t> tokens) {
  if (finished_) return Internal(fmt::format("{}: document added after Finish", file_.path()));
  if (tokens.empty()) {
    return InvalidArgument(
        fmt::format("{}: document {} is empty", file_.path(), index_.size() - 1));
  }
  scratch_.resize(tokens.size() * token_bytes_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t t = tokens[i];
    if (t >= vocab_size_) {
      return InvalidArgument(
          fmt::format("{}: token {} of document {} is {}, not below the vocab "
                      "size {}",
                      file_.path(), i, index_.size() - 1, t, vocab_size_));
    }
    if (token_bytes_ == 2) {
      const auto v = static_cast<uint16_t>(t);
      std::memcpy(&scratch_[2 * i], &v, 2);
    } else {
      std::memcpy(&scratch_[4 * i], &t, 4);
    }
  }
  RETURN_IF_ERROR(AppendPayload(scratch_.data(), scratch_.size()));
  index_.push_back(index_.back() + tokens.size());
  return Status::Ok();
}

Result<ShardInfo> ShardWriter::Finish() {
  if (finished_) return Internal(fmt::format("{}: finished twice", file_.path()));
  finished_ = true;
  const uint64_t num_tokens = index_.back();
  const uint64_t pad = TokensRegionBytes(num_tokens, token_bytes_) - num_tokens * token_bytes_;
  const uint64_t zeros = 0;
  RETURN_IF_ERROR(AppendPayload(&zeros, pad));
  RETURN_IF_ERROR(AppendPayload(index_.data(), index_.size() * sizeof(uint64_t)));
  Header h{};
  std::memcpy(h.magic, kShardMagic, sizeof(h.magic));
  h.version = kShardVersion;
  h.token_bytes = static_cast<uint32_t>(token_bytes_);
  h.vocab_size = vocab_size_;
  h.header_bytes = kShardHeaderBytes;
  h.num_tokens = num_tokens;
  h.num_docs = index_.size() - 1;
  h.payload_checksum = checksum_;
  h.header_checksum = Fnv1a64(&h, kHeaderChecksumOffset);
  RETURN_IF_ERROR(file_.WriteAt(0, &h, sizeof(h)));
  ShardInfo info{file_.path(), vocab_size_, num_tokens, h.num_docs, file_.size(), checksum_};
  RETURN_IF_ERROR(file_.Commit());
  return info;
}

TokenShard::TokenShard(TokenShard&& other) noexcept { *this = std::move(other); }

TokenShard& TokenShard::operator=(TokenShard&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    vocab_size_ = other.vocab_size_;
    token_bytes_ = other.token_bytes_;
    num_tokens_ = other.num_tokens_;
    num_docs_ = other.num_docs_;
    checksum_ = other.checksum_;
    tokens_ = std::exchange(other.tokens_, nullptr);
    index_ = std::exchange(other.index_, nullptr);
  }
  return *this;
}

TokenShard::~TokenShard() { Unmap(); }

void TokenShard::Unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
}

Result<TokenShard> TokenShard::Open(const std::string& path, bool verify) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(fmt::format("{}: no such shard; {}", path, kRerun));
    return IoError(fmt::format("{}: cannot open: {}", path, std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError(fmt::format("{}: cannot stat: {}", path, std::strerror(err)));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kShardHeaderBytes) {
    ::close(fd);
    return Truncated(path, size);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (map == MAP_FAILED)
    return IoError(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
  TokenShard shard;
  shard.path_ = path;
  shard.map_ = map;
  shard.map_bytes_ = size;
  RETURN_IF_ERROR(shard.Init(static_cast<const unsigned char*>(map), size, verify));
  return shard;
}

Result<TokenShard> TokenShard::FromBytes(std::span<const unsigned char> bytes,
                                         const std::string& path, bool verify) {
  CHECK_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % 8, 0u) << path << ": shard bytes unaligned";
  TokenShard shard;
  shard.path_ = path;
  RETURN_IF_ERROR(shard.Init(bytes.data(), bytes.size(), verify));
  return shard;
}

Status TokenShard::Init(const unsigned char* bytes, uint64_t size, bool verify) {
  const std::string& path = path_;
  if (size < kShardHeaderBytes) return Truncated(path, size);
  Header h;
  std::memcpy(&h, bytes, sizeof(h));
  if (std::memcmp(h.magic, kShardMagic, sizeof(h.magic)) != 0) {
    return InvalidArgument(
        fmt::format("{}: not an anvil token shard (bad magic); {}", path, kRerun));
  }
  if (h.version != kShardVersion) {
    return InvalidArgument(fmt::format("{}: shard version {}, this build reads version {}; {}",
                                       path, h.version, kShardVersion, kRerun));
  }
  if (Fnv1a64(&h, kHeaderChecksumOffset) != h.header_checksum) {
    return DataLoss(
        fmt::format("{}: the header is corrupt (header checksum mismatch); {}", path, kRerun));
  }
  if (h.header_bytes != kShardHeaderBytes || (h.token_bytes != 2 && h.token_bytes != 4) ||
      h.vocab_size == 0 || h.vocab_size > (uint32_t{1} << 31) ||
      (h.token_bytes == 2) != (h.vocab_size <= 65536)) {
    return InvalidArgument(
        fmt::format("{}: inconsistent header (token_bytes {}, vocab_size {}, "
                    "header_bytes {}); {}",
                    path, h.token_bytes, h.vocab_size, h.header_bytes, kRerun));
  }
  // Sizes from the header, checked against overflow before use.
  if (h.num_tokens > (uint64_t{1} << 48) || h.num_docs > (uint64_t{1} << 40)) {
    return InvalidArgument(fmt::format("{}: implausible header ({} tokens, {} documents); {}", path,
                                       h.num_tokens, h.num_docs, kRerun));
  }
  const uint64_t tokens_region = TokensRegionBytes(h.num_tokens, h.token_bytes);
  const uint64_t expected = kShardHeaderBytes + tokens_region + (h.num_docs + 1) * 8;
  if (size != expected) {
    return DataLoss(
        fmt::format("{}: {}: expected {} bytes for {} tokens in {} documents, found "
                    "{}; {}",
                    path, size < expected ? "truncated" : "trailing bytes", expected, h.num_tokens,
                    h.num_docs, size, kRerun));
  }
  vocab_size_ = h.vocab_size;
  token_bytes_ = static_cast<int>(h.token_bytes);
  num_tokens_ = h.num_tokens;
  num_docs_ = h.num_docs;
  checksum_ = h.payload_checksum;
  tokens_ = bytes + kShardHeaderBytes;
  index_ = reinterpret_cast<const uint64_t*>(bytes + kShardHeaderBytes + tokens_region);
  if (verify) {
    const uint64_t sum = Fnv1a64(bytes + kShardHeaderBytes, size - kShardHeaderBytes);
    if (sum != h.payload_checksum) {
      return DataLoss(
          fmt::format("{}: checksum mismatch: the header says {:016x}, the data hashes "
                      "to {:016x}; the file is corrupt, {}",
                      path, h.payload_checksum, sum, kRerun));
    }
  }
  if (index_[0] != 0 || index_[h.num_docs] != h.num_tokens) {
    return DataLoss(fmt::format("{}: the document index does not span the {} tokens; {}", path,
                                h.num_tokens, kRerun));
  }
  for (uint64_t d = 0; d < h.num_docs; ++d) {
    if (index_[d + 1] <= index_[d]) {
      return DataLoss(fmt::format("{}: document {} is empty or out of order in the index; {}", path,
                                  d, kRerun));
    }
  }
  if (verify) {
    for (uint64_t i = 0; i < h.num_tokens; ++i) {
      if (Token(i) >= h.vocab_size) {
        return DataLoss(fmt::format("{}: token {} is {}, not below the vocab size {}; {}", path, i,
                                    Token(i), h.vocab_size, kRerun));
      }
    }
  }
  return Status::Ok();
}

void TokenShard::CopyTokens(uint64_t begin, uint64_t count, int32_t* out) const {
  CHECK_LE(begin + count, num_tokens_) << "token range past the end of " << path_;
  if (token_bytes_ == 2) {
    const auto* p = reinterpret_cast<const uint16_t*>(tokens_) + begin;
    for (uint64_t j = 0; j < count; ++j) out[j] = p[j];
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(tokens_) + begin;
    for (uint64_t j = 0; j < count; ++j) out[j] = static_cast<int32_t>(p[j]);
  }
}

uint64_t TokenShard::DocOf(uint64_t i) const {
  CHECK_LT(i, num_tokens_) << "token index past the end of " << path_;
  // The last document whose start is <= i.
  const uint64_t* it = std::upper_bound(index_, index_ + num_docs_ + 1, i);
  return static_cast<uint64_t>(it - index_) - 1;
}

}  // namespace anvil::data
