// BPE training: count pre-tokens once (threads over documents), then merge
// greedily, updating pair counts only for the words that hold the merged pair.
#include "anvil/data/bpe_train.h"

#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/data/pretokenize.h"

namespace anvil::data {
namespace {

inline uint64_t PairKey(uint32_t left, uint32_t right) { return uint64_t{left} << 32 | right; }
inline uint32_t Left(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
inline uint32_t Right(uint64_t key) { return static_cast<uint32_t>(key); }

// Distinct pre-tokens with their counts, sorted by bytes: the same for any
// partition of the documents over threads.
std::vector<std::pair<std::string_view, int64_t>> CountWords(
    std::span<const std::string_view> documents, ThreadPool& pool) {
  using Counts = std::unordered_map<std::string_view, int64_t>;
  std::vector<Counts> partial(pool.size());
  pool.ParallelFor(static_cast<int64_t>(documents.size()), [&](int64_t begin, int64_t end, int t) {
    Counts& counts = partial[t];
    for (int64_t d = begin; d < end; ++d) {
      PreTokenize(documents[d], [&](std::string_view w) { ++counts[w]; });
    }
  });
  Counts all = std::move(partial[0]);
  for (size_t t = 1; t < partial.size(); ++t) {
    for (const auto& [w, c] : partial[t]) all[w] += c;
  }
  std::vector<std::pair<std::string_view, int64_t>> sorted(all.begin(), all.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

class Trainer {
 public:
  Trainer(const BpeTrainOptions& options, std::vector<std::string>* tokens)
      : options_(options), tokens_(*tokens) {}

  void AddWords(const std::vector<std::pair<std::string_view, int64_t>>& words) {
    for (const auto& [w, c] : words) {
      start_.push_back(static_cast<uint32_t>(syms_.size()));
      len_.push_back(static_cast<uint32_t>(w.size()));
      count_.push_back(c);
      for (char ch : w) syms_.push_back(static_cast<uint8_t>(ch));  // byte ids are bytes
    }
    for (uint32_t w = 0; w < count_.size(); ++w) {
      const uint32_t* s = &syms_[start_[w]];
      for (uint32_t i = 0; i + 1 < len_[w]; ++i) {
        const uint64_t key = PairKey(s[i], s[i + 1]);
        counts_[key] += count_[w];
        std::vector<uint32_t>& ws = where_[key];
        if (ws.empty() || ws.back() != w) ws.push_back(w);
      }
    }
    for (const auto& [key, c] : counts_) heap_.push_back({c, key});
    std::make_heap(heap_.begin(), heap_.end(), Order());
  }

  // Merges until the vocabulary is full or no pair is frequent enough.
  void Run(std::vector<BpeMerge>* merges) {
    std::unordered_map<std::string, uint32_t> ids;
    for (uint32_t id = 0; id < tokens_.size(); ++id) ids.emplace(tokens_[id], id);
    const std::unordered_set<std::string> specials = {options_.specials.bos, options_.specials.eos,
                                                      options_.specials.pad};
    while (tokens_.size() < static_cast<size_t>(options_.vocab_size) && !heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Order());
      const Entry top = heap_.back();
      heap_.pop_back();
      const auto it = counts_.find(top.key);
      const int64_t current = it == counts_.end() ? 0 : it->second;
      if (current != top.count) {  // stale: re-queue at its current count
        if (current > 0) PushHeap({current, top.key});
        continue;
      }
      if (current < options_.min_pair_count) break;  // the best is too rare
      std::string merged = tokens_[Left(top.key)] + tokens_[Right(top.key)];
      counts_.erase(it);
      if (specials.count(merged)) {  // would clash with a special token's name
        banned_.insert(top.key);
        continue;
      }
      const auto [slot, fresh] = ids.emplace(merged, static_cast<uint32_t>(tokens_.size()));
      if (fresh) tokens_.push_back(std::move(merged));
      merges->push_back({Left(top.key), Right(top.key), slot->second});
      Apply(top.key, slot->second);
    }
  }

 private:
  struct Entry {
    int64_t count;
    uint64_t key;
  };
  // Heap order: more frequent first; on ties the smaller (left, right) bytes.
  struct Below {
    const std::vector<std::string>* tokens = nullptr;
    bool operator()(const Entry& a, const Entry& b) const;
  };
  Below Order() const { return {&tokens_}; }
  void PushHeap(Entry e) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), Order());
  }

  // Replaces every (left, right) by `result` in the words that hold the pair
  // and applies the change in their pair counts.
  void Apply(uint64_t key, uint32_t result) {
    std::vector<uint32_t> words = std::move(where_[key]);
    where_.erase(key);
    const uint32_t a = Left(key), b = Right(key);
    delta_.clear();
    for (uint32_t w : words) {
      uint32_t* s = &syms_[start_[w]];
      const uint32_t n = len_[w];
      const int64_t c = count_[w];
      // The index may be stale: an earlier merge can have consumed the pair.
      bool found = false;
      for (uint32_t i = 0; i + 1 < n && !found; ++i) found = s[i] == a && s[i + 1] == b;
      if (!found) continue;
      for (uint32_t i = 0; i + 1 < n; ++i) delta_[PairKey(s[i], s[i + 1])] -= c;
      uint32_t j = 0;
      for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
          s[j++] = result;
          i += 2;
        } else {
          s[j++] = s[i++];
        }
      }
      len_[w] = j;
      for (uint32_t i = 0; i + 1 < j; ++i) {
        const uint64_t k = PairKey(s[i], s[i + 1]);
        delta_[k] += c;
        if (s[i] == result || s[i + 1] == result) {
          std::vector<uint32_t>& ws = where_[k];
          if (ws.empty() || ws.back() != w) ws.push_back(w);
        }
      }
    }
    // Pairs that lost occurrences keep their (now too high) heap entries and
    // are re-queued when popped; pairs that gained (new ones) are pushed now.
    for (const auto& [k, d] : delta_) {
      if (d == 0 || k == key || banned_.count(k)) continue;
      int64_t& c = counts_[k];
      c += d;
      if (d > 0) PushHeap({c, k});
      if (c == 0) counts_.erase(k);
    }
  }

  const BpeTrainOptions& options_;
  std::vector<std::string>& tokens_;
  // Word w's symbols are syms_[start_[w], start_[w] + len_[w]); merging shrinks len_.
  std::vector<uint32_t> syms_, start_, len_;
  std::vector<int64_t> count_;
  std::unordered_map<uint64_t, int64_t> counts_;               // pair -> occurrences
  std::unordered_map<uint64_t, std::vector<uint32_t>> where_;  // pair -> words (may be stale)
  std::unordered_map<uint64_t, int64_t> delta_;
  std::unordered_set<uint64_t> banned_;
  std::vector<Entry> heap_;
};

bool Trainer::Below::operator()(const Entry& a, const Entry& b) const {
  if (a.count != b.count) return a.count < b.count;
  // std::string compares chars as unsigned bytes.
  const int left = (*tokens)[Left(a.key)].compare((*tokens)[Left(b.key)]);
  if (left != 0) return left > 0;
  return (*tokens)[Right(a.key)].compare((*tokens)[Right(b.key)]) > 0;
}

// The 256 byte tokens, then the special names (one id for a name given twice).
TokenizerParts BytesAndSpecials(const SpecialTokens& specials) {
  TokenizerParts parts;
  parts.names = specials;
  for (int b = 0; b < 256; ++b) parts.tokens.emplace_back(1, static_cast<char>(b));
  auto special_id = [&](const std::string& name) {
    for (uint32_t id = 256; id < parts.tokens.size(); ++id) {
      if (parts.tokens[id] == name) return id;
    }
    parts.tokens.push_back(name);
    return static_cast<uint32_t>(parts.tokens.size() - 1);
  };
  parts.bos = special_id(specials.bos);
  parts.eos = special_id(specials.eos);
  parts.pad = special_id(specials.pad);
  return parts;
}

}  // namespace

Status BpeTrainOptions::Validate() const {
  if (specials.bos.empty() || specials.eos.empty() || specials.pad.empty()) {
    return InvalidArgument("special token names must not be empty");
  }
  if (vocab_size < 256 + 3 || vocab_size > (1 << 24)) {
    return InvalidArgument(fmt::format(
        "vocab size {} is out of range: it must hold the 256 bytes and 3 special tokens, and be "
        "at most 16777216",
        vocab_size));
  }
  if (min_pair_count < 1) return InvalidArgument("min_pair_count must be at least 1");
  return Status::Ok();
}

Result<Tokenizer> TrainBpe(std::span<const std::string_view> documents,
                           const BpeTrainOptions& options, ThreadPool& pool, BpeTrainStats* stats) {
  RETURN_IF_ERROR(options.Validate());
  BpeTrainStats local;
  Stopwatch watch;
  const auto words = CountWords(documents, pool);
  local.unique_words = static_cast<int64_t>(words.size());
  for (const auto& [w, c] : words) local.pretokens += c;
  local.count_seconds = watch.Seconds();

  watch.Reset();
  TokenizerParts parts = BytesAndSpecials(options.specials);
  {
    Trainer trainer(options, &parts.tokens);
    trainer.AddWords(words);
    trainer.Run(&parts.merges);
  }
  local.merges = static_cast<int64_t>(parts.merges.size());
  local.merge_seconds = watch.Seconds();
  if (stats != nullptr) *stats = local;
  return Tokenizer::FromParts(std::move(parts));
}

Result<Tokenizer> ByteTokenizer(const SpecialTokens& specials) {
  if (specials.bos.empty() || specials.eos.empty() || specials.pad.empty()) {
    return InvalidArgument("special token names must not be empty");
  }
  return Tokenizer::FromParts(BytesAndSpecials(specials));
}

}  // namespace anvil::data
