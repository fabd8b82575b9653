// BPE encoding by merge rank (a min-heap over adjacent pairs, lazily
// invalidated, as Hugging Face's word merge does), decoding, and validation.
#include "anvil/data/tokenizer.h"

#include <fmt/core.h>

#include <algorithm>

#include "anvil/core/check.h"
#include "anvil/data/pretokenize.h"

namespace anvil::data {
namespace {

constexpr uint32_t kNone = ~uint32_t{0};

// Printable form of a token for error messages.
std::string Quote(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7F && c != '"' && c != '\\') {
      out.push_back(c);
    } else {
      out += fmt::format("\\x{:02x}", b);
    }
  }
  return out + "\"";
}

}  // namespace

Result<Tokenizer> Tokenizer::FromParts(TokenizerParts parts) {
  const size_t v = parts.tokens.size();
  if (v < 257 || v > (size_t{1} << 31)) {
    return InvalidArgument(
        fmt::format("vocabulary has {} tokens; need 256 bytes and the special "
                    "tokens, and at most 2^31",
                    v));
  }
  const std::pair<const char*, std::pair<uint32_t, const std::string*>> specials[] = {
      {"bos", {parts.bos, &parts.names.bos}},
      {"eos", {parts.eos, &parts.names.eos}},
      {"pad", {parts.pad, &parts.names.pad}}};
  std::vector<bool> special(v, false);
  for (const auto& [role, id_name] : specials) {
    const auto [id, name] = id_name;
    if (name->empty()) return InvalidArgument(fmt::format("the {} token has an empty name", role));
    if (id >= v || parts.tokens[id] != *name) {
      return InvalidArgument(
          fmt::format("the {} token {} is not token {} of the vocabulary", role, Quote(*name), id));
    }
    special[id] = true;
  }
  for (const auto& [role_a, a] : specials) {
    for (const auto& [role_b, b] : specials) {
      if (a.first == b.first && *a.second != *b.second) {
        return InvalidArgument(fmt::format(
            "special tokens {} and {} share id {} but differ in name", role_a, role_b, a.first));
      }
    }
  }
  std::array<uint32_t, 256> byte_token;
  byte_token.fill(kNone);
  std::unordered_map<std::string_view, uint32_t> by_bytes;
  by_bytes.reserve(v);
  for (uint32_t id = 0; id < v; ++id) {
    if (special[id]) continue;
    const std::string& t = parts.tokens[id];
    if (t.empty()) return InvalidArgument(fmt::format("token {} is empty", id));
    const auto [it, fresh] = by_bytes.emplace(t, id);
    if (!fresh) {
      return InvalidArgument(fmt::format("tokens {} and {} are both {}", it->second, id, Quote(t)));
    }
    if (t.size() == 1) byte_token[static_cast<uint8_t>(t[0])] = id;
  }
  for (const auto& [role, id_name] : specials) {
    if (by_bytes.count(*id_name.second)) {
      return InvalidArgument(
          fmt::format("the {} token {} is also an ordinary token", role, Quote(*id_name.second)));
    }
  }
  for (int b = 0; b < 256; ++b) {
    if (byte_token[b] == kNone) {
      return InvalidArgument(
          fmt::format("byte 0x{:02x} has no token; a byte-level vocabulary "
                      "needs all 256",
                      b));
    }
  }
  std::unordered_map<uint64_t, uint64_t> index;
  index.reserve(parts.merges.size());
  for (size_t rank = 0; rank < parts.merges.size(); ++rank) {
    const BpeMerge& m = parts.merges[rank];
    if (m.left >= v || m.right >= v || m.result >= v || special[m.left] || special[m.right] ||
        special[m.result]) {
      return InvalidArgument(
          fmt::format("merge {} ({} {} -> {}) names an unknown or special "
                      "token",
                      rank, m.left, m.right, m.result));
    }
    if (parts.tokens[m.result] != parts.tokens[m.left] + parts.tokens[m.right]) {
      return InvalidArgument(fmt::format("merge {} joins {} and {} but its result is {}", rank,
                                         Quote(parts.tokens[m.left]), Quote(parts.tokens[m.right]),
                                         Quote(parts.tokens[m.result])));
    }
    if (!index.emplace(uint64_t{m.left} << 32 | m.right, uint64_t{rank} << 32 | m.result).second) {
      return InvalidArgument(fmt::format("merge {} ({} {}) repeats an earlier merge", rank,
                                         Quote(parts.tokens[m.left]),
                                         Quote(parts.tokens[m.right])));
    }
  }
  Tokenizer t(std::move(parts));
  t.byte_token_ = byte_token;
  t.is_special_ = std::move(special);
  t.merge_index_ = std::move(index);
  return t;
}

Tokenizer::Tokenizer(TokenizerParts parts) : parts_(std::move(parts)) {}

void Tokenizer::EncodeWord(std::string_view word, std::vector<uint32_t>* out) const {
  const size_t n = word.size();
  if (n == 0) return;
  if (n == 1) {
    out->push_back(byte_token_[static_cast<uint8_t>(word[0])]);
    return;
  }
  // Symbols in a doubly linked list; a merged-away symbol gets id kNone.
  // Scratch is per thread and reused: most calls are for short words.
  struct Symbol {
    uint32_t id;
    int32_t prev, next;
  };
  // Candidates ordered by (rank, position): the lowest rank first and, among
  // equal ranks, the leftmost (so "aaa" with merge a+a gives "aa a").
  using Candidate = std::pair<uint32_t, int32_t>;  // rank, position of the left symbol
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Candidate> heap;
  sym.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i) {
    sym[i] = {byte_token_[static_cast<uint8_t>(word[i])], static_cast<int32_t>(i) - 1,
              i + 1 < n ? static_cast<int32_t>(i + 1) : -1};
  }
  auto push = [&](int32_t pos) {
    const int32_t next = sym[pos].next;
    if (next < 0) return;
    const uint64_t m = FindMerge(sym[pos].id, sym[next].id);
    if (m == ~uint64_t{0}) return;
    heap.emplace_back(static_cast<uint32_t>(m >> 32), pos);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const auto [rank, pos] = heap.back();
    heap.pop_back();
    const BpeMerge& m = parts_.merges[rank];
    Symbol& s = sym[pos];
    if (s.id != m.left || s.next < 0 || sym[s.next].id != m.right) continue;  // stale
    Symbol& right = sym[s.next];
    s.id = m.result;
    right.id = kNone;
    s.next = right.next;
    if (s.next >= 0) sym[s.next].prev = pos;
    if (s.prev >= 0) push(s.prev);
    push(pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out->push_back(sym[i].id);
}

void Tokenizer::Encode(std::string_view text, std::vector<uint32_t>* out) const {
  Encoder(*this).Encode(text, out);
}

std::vector<uint32_t> Tokenizer::Encode(std::string_view text) const {
  std::vector<uint32_t> out;
  Encoder(*this).Encode(text, &out);
  return out;
}

std::vector<uint32_t> Tokenizer::EncodeWithSpecials(std::string_view text) const {
  const std::pair<const std::string*, uint32_t> specials[] = {{&parts_.names.bos, parts_.bos},
                                                              {&parts_.names.eos, parts_.eos},
                                                              {&parts_.names.pad, parts_.pad}};
  std::vector<uint32_t> out;
  Encoder encoder(*this);
  size_t start = 0;
  for (size_t pos = 0; pos < text.size();) {
    // The longest special name that starts here, if any.
    const std::pair<const std::string*, uint32_t>* hit = nullptr;
    for (const auto& s : specials) {
      if (text.substr(pos).starts_with(*s.first) &&
          (hit == nullptr || s.first->size() > hit->first->size())) {
        hit = &s;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    encoder.Encode(text.substr(start, pos - start), &out);
    out.push_back(hit->second);
    pos += hit->first->size();
    start = pos;
  }
  encoder.Encode(text.substr(start), &out);
  return out;
}

std::string Tokenizer::Decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (uint32_t id : ids) {
    CHECK_LT(id, parts_.tokens.size()) << "token id out of the vocabulary";
    out += parts_.tokens[id];
  }
  return out;
}

std::string Tokenizer::TokenText(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return "?";
  return parts_.tokens[static_cast<size_t>(id)];
}

Encoder::Encoder(const Tokenizer& tokenizer, size_t max_entries)
    : tokenizer_(tokenizer), max_entries_(max_entries) {}

void Encoder::Encode(std::string_view text, std::vector<uint32_t>* out) {
  // Long pieces (runs of spaces, binary junk) are rare and not worth keeping.
  constexpr size_t kMaxCachedBytes = 64;
  PreTokenize(text, [&](std::string_view piece) {
    if (piece.size() > kMaxCachedBytes) {
      tokenizer_.EncodeWord(piece, out);
      return;
    }
    if (const auto it = cache_.find(piece); it != cache_.end()) {
      out->insert(out->end(), ids_.begin() + it->second.begin,
                  ids_.begin() + it->second.begin + it->second.size);
      return;
    }
    scratch_.clear();
    tokenizer_.EncodeWord(piece, &scratch_);
    out->insert(out->end(), scratch_.begin(), scratch_.end());
    if (cache_.size() >= max_entries_) {
      cache_.clear();
      ids_.clear();
    }
    cache_.emplace(std::string(piece), Span{static_cast<uint32_t>(ids_.size()),
                                            static_cast<uint32_t>(scratch_.size())});
    ids_.insert(ids_.end(), scratch_.begin(), scratch_.end());
  });
}

}  // namespace anvil::data
