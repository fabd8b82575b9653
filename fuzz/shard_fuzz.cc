// libFuzzer target: the token shard header and document index
// (TokenShard::FromBytes, what TokenShard::Open runs on the mapped file). Each
// input is tried as given and with its two checksums recomputed, so mutations
// get past the checksums to the size and index checks. A shard it accepts must
// answer every query inside its bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "anvil/core/check.h"
#include "anvil/core/file_util.h"
#include "anvil/data/shard.h"

namespace {

using anvil::data::TokenShard;

void Exercise(const TokenShard& shard, bool verified) {
  CHECK_LE(shard.num_docs(), shard.num_tokens());
  std::vector<int32_t> tokens(shard.num_tokens());
  shard.CopyTokens(0, shard.num_tokens(), tokens.data());
  if (verified) {
    for (int32_t t : tokens) CHECK_LT(static_cast<uint32_t>(t), shard.vocab_size());
  }
  for (uint64_t d = 0; d < shard.num_docs(); ++d) {
    CHECK_LT(shard.DocStart(d), shard.DocStart(d + 1));
    CHECK_EQ(shard.DocOf(shard.DocStart(d)), d);
    CHECK_EQ(shard.DocOf(shard.DocStart(d + 1) - 1), d);
  }
}

void Try(const std::vector<uint64_t>& words, size_t size, bool verify) {
  const std::span<const unsigned char> bytes(reinterpret_cast<const unsigned char*>(words.data()),
                                             size);
  const anvil::Result<TokenShard> shard = TokenShard::FromBytes(bytes, "fuzz.bin", verify);
  if (shard.ok()) Exercise(*shard, verify);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 8-byte aligned, as a mapped file is.
  std::vector<uint64_t> words((size + 7) / 8);
  if (size > 0) std::memcpy(words.data(), data, size);
  Try(words, size, /*verify=*/true);
  if (size < anvil::data::kShardHeaderBytes) return 0;
  // Header: payload_checksum at byte 40, header_checksum (of bytes [0, 56)) at 56.
  auto* bytes = reinterpret_cast<unsigned char*>(words.data());
  const uint64_t payload = anvil::Fnv1a64(bytes + anvil::data::kShardHeaderBytes,
                                          size - anvil::data::kShardHeaderBytes);
  std::memcpy(bytes + 40, &payload, 8);
  const uint64_t header = anvil::Fnv1a64(bytes, 56);
  std::memcpy(bytes + 56, &header, 8);
  Try(words, size, /*verify=*/true);
  Try(words, size, /*verify=*/false);
  return 0;
}
