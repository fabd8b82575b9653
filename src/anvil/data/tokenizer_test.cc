// BPE training and encoding: known merges on a hand-counted text, agreement
// with slow reference implementations (recount-every-merge training, GPT-2's
// merge loop), determinism across thread counts, and decode(encode(b)) == b
// on random bytes with NULs and invalid UTF-8.
#include "anvil/data/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/pretokenize.h"

namespace anvil::data {
namespace {

Tokenizer Train(const std::vector<std::string>& docs, int vocab, int threads = 1) {
  std::vector<std::string_view> views(docs.begin(), docs.end());
  ThreadPool pool(threads);
  BpeTrainOptions options;
  options.vocab_size = vocab;
  auto tok = TrainBpe(views, options, pool);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return std::move(tok).value();
}

std::vector<std::pair<std::string, std::string>> MergeStrings(const Tokenizer& t) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const BpeMerge& m : t.merges())
    out.emplace_back(t.TokenBytes(m.left), t.TokenBytes(m.right));
  return out;
}

// Words over a small alphabet: many ties, repeats like "aaaa", shared pieces.
std::vector<std::string> RandomDocs(uint64_t seed, int docs, int words) {
  const RngStream rng(seed, RngPurpose::kTest);
  uint64_t k = 0;
  std::vector<std::string> out;
  for (int d = 0; d < docs; ++d) {
    std::string text;
    for (int w = 0; w < words; ++w) {
      const int len = 1 + rng.U32(k++) % 6;
      if (w > 0) text += rng.U32(k++) % 8 == 0 ? "\n" : " ";
      for (int i = 0; i < len; ++i) text.push_back("aabcd'."[rng.U32(k++) % 7]);
    }
    out.push_back(text);
  }
  return out;
}

// Reference trainer: recounts every pair each round; same tie rule and same
// reuse of an existing token for a repeated spelling.
std::vector<std::pair<std::string, std::string>> SlowTrain(const std::vector<std::string>& docs,
                                                           int vocab) {
  std::map<std::string, int64_t> counts;
  for (const std::string& d : docs)
    PreTokenize(d, [&](std::string_view w) { ++counts[std::string(w)]; });
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [w, c] : counts) {
    std::vector<std::string> syms;
    for (char ch : w) syms.emplace_back(1, ch);
    words.emplace_back(syms, c);
  }
  std::set<std::string> tokens;
  int size = 259;
  std::vector<std::pair<std::string, std::string>> merges;
  while (size < vocab) {
    std::map<std::pair<std::string, std::string>, int64_t> pairs;  // ordered: ties go to the first
    for (const auto& [syms, c] : words) {
      for (size_t i = 0; i + 1 < syms.size(); ++i) pairs[{syms[i], syms[i + 1]}] += c;
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_count = 1;  // min_pair_count 2
    for (const auto& [p, c] : pairs) {
      if (c > best_count) best = &p, best_count = c;
    }
    if (best == nullptr) break;
    const auto [a, b] = *best;
    merges.emplace_back(a, b);
    if (a.size() + b.size() > 1 && tokens.insert(a + b).second) ++size;
    for (auto& [syms, c] : words) {
      std::vector<std::string> next;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
          next.push_back(a + b);
          ++i;
        } else {
          next.push_back(syms[i]);
        }
      }
      syms = next;
    }
  }
  return merges;
}

// GPT-2's encoder.py loop: merge every occurrence of the lowest-rank pair.
std::vector<uint32_t> SlowEncodeWord(const Tokenizer& t, std::string_view word) {
  std::map<std::pair<uint32_t, uint32_t>, std::pair<size_t, uint32_t>> rank;
  for (size_t r = 0; r < t.merges().size(); ++r) {
    const BpeMerge& m = t.merges()[r];
    rank.emplace(std::pair{m.left, m.right}, std::pair{r, m.result});
  }
  std::vector<uint32_t> s;
  for (char c : word) s.push_back(t.ByteToken(static_cast<uint8_t>(c)));
  while (s.size() > 1) {
    size_t best = SIZE_MAX;
    uint32_t result = 0, a = 0, b = 0;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const auto it = rank.find({s[i], s[i + 1]});
      if (it != rank.end() && it->second.first < best) {
        best = it->second.first, result = it->second.second, a = s[i], b = s[i + 1];
      }
    }
    if (best == SIZE_MAX) break;
    std::vector<uint32_t> next;
    for (size_t i = 0; i < s.size(); ++i) {
      if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
        next.push_back(result);
        ++i;
      } else {
        next.push_back(s[i]);
      }
    }
    s = next;
  }
  return s;
}

TEST(BpeTrain, KnownMergesOnAHandCountedText) {
  // Words: "ab" x1, " ab" x3, " cd" x2. Pair counts: a+b 4, ' '+a 3, ' '+c 2,
  // c+d 2. After a+b: ' '+ab 3. Then ' '+c and c+d tie at 2: ' ' < 'c' wins.
  const Tokenizer t = Train({"ab ab ab ab cd cd"}, 1000);
  using P = std::pair<std::string, std::string>;
  EXPECT_EQ(MergeStrings(t), (std::vector<P>{{"a", "b"}, {" ", "ab"}, {" ", "c"}, {" c", "d"}}));
  EXPECT_EQ(t.vocab_size(), 256 + 3 + 4);  // stopped early: no pair seen twice is left
  EXPECT_EQ(t.bos_id(), 256u);
  EXPECT_EQ(t.eos_id(), 257u);
  EXPECT_EQ(t.pad_id(), 258u);
  EXPECT_EQ(t.TokenBytes(259), "ab");
  EXPECT_EQ(t.TokenBytes(262), " cd");
  EXPECT_EQ(t.Encode("ab cd ab"), (std::vector<uint32_t>{259, 262, 260}));
  for (int b = 0; b < 256; ++b) EXPECT_EQ(t.ByteToken(static_cast<uint8_t>(b)), uint32_t(b));
}

TEST(BpeTrain, VocabSizeIsReachedExactly) {
  const Tokenizer t = Train(RandomDocs(1, 4, 400), 300);
  EXPECT_EQ(t.vocab_size(), 300);
}

TEST(BpeTrain, MatchesTheRecountingReference) {
  for (uint64_t seed : {2, 3, 4}) {
    const std::vector<std::string> docs = RandomDocs(seed, 5, 300);
    const Tokenizer t = Train(docs, 420);
    EXPECT_EQ(MergeStrings(t), SlowTrain(docs, 420)) << "seed " << seed;
  }
}

TEST(BpeTrain, SameMergesForAnyThreadCount) {
  const std::vector<std::string> docs = RandomDocs(5, 13, 200);
  const auto one = MergeStrings(Train(docs, 400, 1));
  EXPECT_EQ(MergeStrings(Train(docs, 400, 2)), one);
  EXPECT_EQ(MergeStrings(Train(docs, 400, 3)), one);
}

TEST(BpeTrain, ByteTokenizerIsTrainBpeWithoutMerges) {
  auto bytes = ByteTokenizer();
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(bytes->vocab_size(), 259);
  EXPECT_TRUE(bytes->merges().empty());
  const Tokenizer trained = Train(RandomDocs(6, 3, 100), 259);
  EXPECT_EQ(bytes->eos_id(), trained.eos_id());
  EXPECT_EQ(bytes->bos_id(), trained.bos_id());
  EXPECT_EQ(bytes->Encode("123+45="), trained.Encode("123+45="));
  EXPECT_EQ(bytes->Encode("12").size(), 2u);
  // One id's text, and "?" beyond the vocabulary.
  const std::vector<uint32_t> ids = bytes->Encode("7");
  EXPECT_EQ(bytes->TokenText(ids[0]), "7");
  EXPECT_EQ(bytes->TokenText(259), "?");
  EXPECT_EQ(bytes->TokenText(-1), "?");
}

TEST(BpeTrain, RejectsBadOptions) {
  ThreadPool pool(1);
  BpeTrainOptions options;
  options.vocab_size = 100;
  std::vector<std::string_view> docs = {"x"};
  EXPECT_FALSE(TrainBpe(docs, options, pool).ok());
  options.vocab_size = 300;
  options.specials.pad = "";
  EXPECT_FALSE(TrainBpe(docs, options, pool).ok());
}

TEST(Encode, MatchesGpt2MergeLoop) {
  const Tokenizer t = Train(RandomDocs(6, 4, 500), 400);
  const RngStream rng(8, RngPurpose::kTest);
  uint64_t k = 0;
  for (int trial = 0; trial < 500; ++trial) {
    std::string word;
    const int len = 1 + rng.U32(k++) % 12;
    for (int i = 0; i < len; ++i) word.push_back("aabcd'. "[rng.U32(k++) % 8]);
    std::vector<uint32_t> fast;
    t.EncodeWord(word, &fast);
    EXPECT_EQ(fast, SlowEncodeWord(t, word)) << word;
  }
}

TEST(Encode, DecodeInvertsEncodeOnRandomBytes) {
  const Tokenizer t = Train({"the cat sat on the mat; the dog's bone isn't here.\n\n"
                             "caf\xC3\xA9 \xE2\x80\x94 na\xC3\xAFve 123 456"},
                            320);
  const RngStream rng(9, RngPurpose::kTest);
  uint64_t k = 0;
  Encoder cached(t, /*max_entries=*/8);  // tiny: the cache is cleared often
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = rng.U32(k++) % 300;
    std::string bytes;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rng.U32(k++);
      bytes.push_back(r % 3 == 0 ? static_cast<char>(r >> 8)
                                 : "the cat\0\n\xff\xc3"[(r >> 8) % 12]);
    }
    const std::vector<uint32_t> ids = t.Encode(bytes);
    EXPECT_EQ(t.Decode(ids), bytes);
    std::vector<uint32_t> again;
    cached.Encode(bytes, &again);
    EXPECT_EQ(again, ids);
  }
}

TEST(Encode, SpecialNamesAreTextUnlessAsked) {
  const Tokenizer t = Train({"hello world hello world"}, 300);
  const std::string text = "hi<|eos|>there<|bos|>";
  const std::vector<uint32_t> plain = t.Encode(text);
  for (uint32_t id : plain) EXPECT_FALSE(t.IsSpecial(id));
  EXPECT_EQ(t.Decode(plain), text);
  const std::vector<uint32_t> split = t.EncodeWithSpecials(text);
  EXPECT_EQ(split.back(), t.bos_id());
  EXPECT_EQ(std::count(split.begin(), split.end(), t.eos_id()), 1);
  EXPECT_EQ(t.Decode(split), text);
}

TEST(Tokenizer, FromPartsRejectsBrokenParts) {
  TokenizerParts parts;
  for (int b = 0; b < 256; ++b) parts.tokens.emplace_back(1, static_cast<char>(b));
  parts.tokens.push_back("<|bos|>");
  parts.tokens.push_back("<|eos|>");
  parts.tokens.push_back("<|pad|>");
  parts.bos = 256, parts.eos = 257, parts.pad = 258;
  EXPECT_TRUE(Tokenizer::FromParts(parts).ok());
  {
    TokenizerParts p = parts;
    p.tokens[65] = "AA";  // byte 'A' has no token now
    const auto r = Tokenizer::FromParts(p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("byte 0x41 has no token"), std::string::npos);
  }
  {
    TokenizerParts p = parts;
    p.tokens.push_back("ab");
    p.merges.push_back({'a', 'c', 259});  // "a" + "c" is not "ab"
    EXPECT_FALSE(Tokenizer::FromParts(p).ok());
  }
  {
    TokenizerParts p = parts;
    p.eos = 258;  // names "<|pad|>" but the eos name is "<|eos|>"
    EXPECT_FALSE(Tokenizer::FromParts(p).ok());
  }
}

}  // namespace
}  // namespace anvil::data
