// Byte-level BPE tokenizer (GPT-2 style): encode, decode, special tokens.
// Invariant: decode(encode(b)) == b for every byte string b, because every byte
// has a token and pre-tokens tile the input. Ids produced by TrainBpe: 0..255
// are the bytes (id == byte value), 256..258 bos/eos/pad, then merges in rank
// order; a loaded tokenizer.json may number them any way (dense ids only).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::data {

// The names of the special tokens. They are whole tokens, never produced by
// encoding ordinary text: "<|eos|>" inside a document is just bytes.
struct SpecialTokens {
  std::string bos = "<|bos|>";
  std::string eos = "<|eos|>";
  std::string pad = "<|pad|>";
};

// One merge: tokens `left` and `right`, adjacent, become `result`. A merge's
// rank is its index in the merge list; lower ranks apply first.
struct BpeMerge {
  uint32_t left, right, result;
};

// Everything that defines a tokenizer; Tokenizer::FromParts validates it.
struct TokenizerParts {
  std::vector<std::string> tokens;  // id -> bytes (specials: their names)
  std::vector<BpeMerge> merges;     // rank order
  SpecialTokens names;
  uint32_t bos = 0, eos = 0, pad = 0;  // ids of the specials (may coincide)
};

class Tokenizer {
 public:
  // Checks the parts: every byte has exactly one single-byte token, each merge
  // joins existing ordinary tokens into the token spelled by their
  // concatenation, no pair is merged twice, and the special ids hold tokens
  // spelled as their names.
  static Result<Tokenizer> FromParts(TokenizerParts parts);

  int vocab_size() const { return static_cast<int>(parts_.tokens.size()); }
  const std::vector<BpeMerge>& merges() const { return parts_.merges; }
  const SpecialTokens& special_names() const { return parts_.names; }
  uint32_t bos_id() const { return parts_.bos; }
  uint32_t eos_id() const { return parts_.eos; }
  uint32_t pad_id() const { return parts_.pad; }
  bool IsSpecial(uint32_t id) const { return id < is_special_.size() && is_special_[id]; }
  // The bytes a token decodes to (a special token: its name).
  const std::string& TokenBytes(uint32_t id) const { return parts_.tokens[id]; }
  uint32_t ByteToken(uint8_t b) const { return byte_token_[b]; }

  // Appends the tokens of `text`; special names in it are ordinary bytes.
  void Encode(std::string_view text, std::vector<uint32_t>* out) const;
  std::vector<uint32_t> Encode(std::string_view text) const;
  // As Encode, but exact occurrences of the special names become their ids.
  std::vector<uint32_t> EncodeWithSpecials(std::string_view text) const;
  // Appends the tokens of one pre-token, merging by rank (no cache).
  void EncodeWord(std::string_view word, std::vector<uint32_t>* out) const;

  // The bytes of `ids`; special tokens become their names. Every id must be
  // below vocab_size() (CHECKed: shards validate their tokens on open).
  std::string Decode(std::span<const uint32_t> ids) const;
  // One generated id's bytes; "?" for an id beyond the vocabulary (a model's
  // may be larger than its tokenizer's).
  std::string TokenText(int64_t id) const;

 private:
  explicit Tokenizer(TokenizerParts parts);

  // (rank << 32 | result) of the merge of (left, right), or ~0 if none.
  uint64_t FindMerge(uint32_t left, uint32_t right) const {
    const auto it = merge_index_.find(uint64_t{left} << 32 | right);
    return it == merge_index_.end() ? ~uint64_t{0} : it->second;
  }

  TokenizerParts parts_;
  std::array<uint32_t, 256> byte_token_{};
  std::vector<bool> is_special_;
  std::unordered_map<uint64_t, uint64_t> merge_index_;  // (left << 32 | right) -> rank, result
};

// Encodes with a cache of the token ids of recent pre-tokens (most words of a
// corpus repeat). Not thread-safe: make one per thread. The cache never
// changes results; it is cleared when it holds `max_entries` words.
class Encoder {
 public:
  explicit Encoder(const Tokenizer& tokenizer, size_t max_entries = size_t{1} << 16);
  void Encode(std::string_view text, std::vector<uint32_t>* out);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  struct Span {
    uint32_t begin, size;  // into ids_
  };
  const Tokenizer& tokenizer_;
  size_t max_entries_;
  std::unordered_map<std::string, Span, Hash, std::equal_to<>> cache_;
  std::vector<uint32_t> ids_;
  std::vector<uint32_t> scratch_;
};

}  // namespace anvil::data
