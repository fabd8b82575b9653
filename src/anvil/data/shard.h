// Token shards: one file per split holding documents of token ids. Written
// atomically (temp, fsync, rename); read through mmap and validated on open.
//
// Layout, little-endian:
//   [0, 64)   header: magic "ANVILTOK", u32 version (1), u32 token_bytes (2 when
//             vocab_size <= 65536, else 4), u32 vocab_size, u32 header_bytes (64),
//             u64 num_tokens, u64 num_docs, u64 payload_checksum (FNV-1a 64 of
//             every byte after the header), u64 reserved (0),
//             u64 header_checksum (FNV-1a 64 of bytes [0, 56))
//   tokens    num_tokens ids of token_bytes each, zero-padded to a multiple of 8
//   index     num_docs + 1 u64 offsets: document d is tokens [index[d], index[d+1]);
//             index[0] = 0, strictly increasing, index[num_docs] = num_tokens
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/status.h"
#include "anvil/core/file_util.h"

namespace anvil::data {

inline constexpr char kShardMagic[8] = {'A', 'N', 'V', 'I', 'L', 'T', 'O', 'K'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint32_t kShardHeaderBytes = 64;

// What a finished shard holds.
struct ShardInfo {
  std::string path;
  uint32_t vocab_size = 0;
  uint64_t num_tokens = 0;
  uint64_t num_docs = 0;
  uint64_t file_bytes = 0;
  uint64_t checksum = 0;
};

// Streams documents into a new shard; the file appears only at Finish().
class ShardWriter {
 public:
  static Result<ShardWriter> Create(const std::string& path, uint32_t vocab_size);
  ShardWriter(ShardWriter&&) noexcept = default;

  // Appends one non-empty document; every id must be below vocab_size.
  Status AddDocument(std::span<const uint32_t> tokens);
  Result<ShardInfo> Finish();

 private:
  ShardWriter(AtomicFile file, uint32_t vocab_size);
  Status AppendPayload(const void* data, size_t size);

  AtomicFile file_;
  uint32_t vocab_size_;
  int token_bytes_;
  uint64_t checksum_ = kFnv1a64Offset;  // of the payload so far
  std::vector<uint64_t> index_{0};
  std::vector<unsigned char> scratch_;
  bool finished_ = false;
};

// A read-only, memory-mapped shard. Open() checks the header, the file size
// and the document index always; with `verify` (the default) also the payload
// checksum and that every token is below vocab_size (one pass over the file,
// about 1 GB/s).
class TokenShard {
 public:
  static Result<TokenShard> Open(const std::string& path, bool verify = true);
  // The same checks on a shard already in memory; `path` names it in errors.
  // The bytes are borrowed: 8-byte aligned, valid while the shard lives.
  static Result<TokenShard> FromBytes(std::span<const unsigned char> bytes,
                                      const std::string& path, bool verify = true);
  TokenShard(TokenShard&& other) noexcept;
  TokenShard& operator=(TokenShard&& other) noexcept;
  TokenShard(const TokenShard&) = delete;
  ~TokenShard();

  const std::string& path() const { return path_; }
  uint32_t vocab_size() const { return vocab_size_; }
  int token_bytes() const { return token_bytes_; }
  uint64_t num_tokens() const { return num_tokens_; }
  uint64_t num_docs() const { return num_docs_; }
  uint64_t checksum() const { return checksum_; }

  uint32_t Token(uint64_t i) const {
    return token_bytes_ == 2 ? reinterpret_cast<const uint16_t*>(tokens_)[i]
                             : reinterpret_cast<const uint32_t*>(tokens_)[i];
  }
  // out[j] = Token(begin + j) for j < count; the range must lie in the shard.
  void CopyTokens(uint64_t begin, uint64_t count, int32_t* out) const;
  // Offsets of document d in the token stream: [DocStart(d), DocStart(d + 1)).
  uint64_t DocStart(uint64_t d) const { return index_[d]; }
  // The document holding token i (i < num_tokens).
  uint64_t DocOf(uint64_t i) const;

 private:
  TokenShard() = default;
  void Unmap();
  // Checks the header, size and index of `bytes` and points the views at them.
  Status Init(const unsigned char* bytes, uint64_t size, bool verify);

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  uint32_t vocab_size_ = 0;
  int token_bytes_ = 0;
  uint64_t num_tokens_ = 0, num_docs_ = 0, checksum_ = 0;
  const unsigned char* tokens_ = nullptr;
  const uint64_t* index_ = nullptr;
};

}  // namespace anvil::data
