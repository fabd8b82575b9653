// End to end: a small prepare on a temp folder writes a tokenizer, shards and
// meta.json that agree with each other and with the input, byte-identical for
// any thread count; the split is deterministic; bad input is a clear error.
#include "anvil/data/prepare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "anvil/core/rng.h"
#include "anvil/data/shard.h"
#include "anvil/data/testing.h"
#include "anvil/data/tokenizer_json.h"

namespace anvil::data {
namespace {

// Forty English-like documents with repeated words (so BPE has pairs to learn).
std::vector<std::string> WriteCorpus(const std::string& dir) {
  const char* words[] = {"the",  "cat",   "sat",  "on",   "a",   "mat",  "and", "dog's",
                         "bone", "isn't", "here", "1961", "ran", "away", ",",   "."};
  const RngStream rng(11, RngPurpose::kTest);
  uint64_t k = 0;
  std::vector<std::string> docs;
  for (int d = 0; d < 40; ++d) {
    std::string text;
    const int n = 20 + rng.U32(k++) % 60;
    for (int i = 0; i < n; ++i) {
      text += words[rng.U32(k++) % 16];
      text += rng.U32(k++) % 10 == 0 ? "\n" : " ";
    }
    docs.push_back(text);
    testing::WriteBytes(dir + "/doc" + std::to_string(100 + d) + ".txt", text);
  }
  return docs;
}

TEST(Prepare, WritesConsistentFilesIdenticallyForAnyThreadCount) {
  testing::TempDir dir;
  const std::vector<std::string> docs = WriteCorpus(dir / "corpus");
  std::string files[2][4];
  for (int threads : {1, 2}) {
    PrepareOptions o;
    o.corpus = dir / "corpus";
    o.out_dir = dir / ("out" + std::to_string(threads));
    o.vocab_size = 300;
    o.val_fraction = 0.1;
    o.threads = threads;
    std::vector<std::string> stages;
    auto s = Prepare(
        o, [&](std::string_view stage, std::string_view, double) { stages.emplace_back(stage); });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(stages.front(), "corpus");
    EXPECT_EQ(stages.back(), "done");
    EXPECT_EQ(s->train.documents + s->val.documents, 40);
    EXPECT_GE(s->val.documents, 1);
    EXPECT_EQ(s->vocab_size, 300);
    int f = 0;
    for (const char* name : {"tokenizer.json", "train.bin", "val.bin", "meta.json"}) {
      files[threads - 1][f++] = testing::ReadBytes(o.out_dir + "/" + name);
    }
  }
  for (int f = 0; f < 4; ++f) EXPECT_EQ(files[0][f], files[1][f]) << "file " << f;

  // The shards decode back to the documents, framed by bos ... eos, in order.
  auto tok = LoadTokenizer(dir / "out1/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const std::vector<bool> is_val = ValidationDocuments(40, 0.1, 1234);
  auto train = TokenShard::Open(dir / "out1/train.bin");
  auto val = TokenShard::Open(dir / "out1/val.bin");
  ASSERT_TRUE(train.ok() && val.ok());
  uint64_t next[2] = {0, 0};
  std::vector<int64_t> counts(300, 0);
  for (size_t d = 0; d < docs.size(); ++d) {
    const TokenShard& shard = is_val[d] ? *val : *train;
    const uint64_t i = next[is_val[d]]++;
    std::vector<uint32_t> ids;
    for (uint64_t t = shard.DocStart(i); t < shard.DocStart(i + 1); ++t)
      ids.push_back(shard.Token(t));
    ASSERT_GE(ids.size(), 2u);
    EXPECT_EQ(ids.front(), tok->bos_id());
    EXPECT_EQ(ids.back(), tok->eos_id());
    EXPECT_EQ(tok->Decode(std::span(ids).subspan(1, ids.size() - 2)), docs[d]);
    if (is_val[d]) {
      for (uint32_t t : ids) ++counts[t];
    }
  }
  EXPECT_EQ(next[0], train->num_docs());
  EXPECT_EQ(next[1], val->num_docs());

  const auto meta = nlohmann::json::parse(files[0][3]);
  EXPECT_EQ(meta["vocab_size"], 300);
  EXPECT_EQ(meta["documents"], 40);
  EXPECT_EQ(meta["val"]["tokens"], val->num_tokens());
  EXPECT_EQ(meta["train"]["tokens"], train->num_tokens());
  EXPECT_EQ(meta["special_tokens"]["eos"]["id"], tok->eos_id());
  EXPECT_NEAR(meta["val_unigram_entropy_nats"].get<double>(), UnigramEntropy(counts), 1e-12);
  EXPECT_NEAR(meta["val_bytes_per_token"].get<double>(),
              double(meta["val"]["bytes"].get<int64_t>()) / val->num_tokens(), 1e-12);
  EXPECT_GT(meta["compression_bytes_per_token"].get<double>(), 1.5);
}

TEST(Prepare, SplitIsDeterministicAndNeverEmpty) {
  const std::vector<bool> a = ValidationDocuments(1000, 0.02, 7);
  EXPECT_EQ(a, ValidationDocuments(1000, 0.02, 7));
  EXPECT_NE(a, ValidationDocuments(1000, 0.02, 8));
  const auto n = std::count(a.begin(), a.end(), true);
  EXPECT_GT(n, 5);
  EXPECT_LT(n, 40);
  for (size_t docs : {2, 3, 10}) {
    const std::vector<bool> v = ValidationDocuments(docs, 0.01, 1);
    EXPECT_EQ(std::count(v.begin(), v.end(), true), 1) << docs;
  }
}

TEST(Prepare, UnigramEntropy) {
  EXPECT_DOUBLE_EQ(UnigramEntropy({5, 0, 0}), 0.0);
  EXPECT_NEAR(UnigramEntropy({1, 1, 1, 1}), std::log(4.0), 1e-12);
}

TEST(Prepare, BadInputIsAClearError) {
  testing::TempDir dir;
  PrepareOptions o;
  o.corpus = dir / "missing";
  o.out_dir = dir / "out";
  auto r = Prepare(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing: no such file or folder"), std::string::npos);
  testing::WriteBytes(dir / "one.txt", "just one document");
  o.corpus = dir / "one.txt";
  r = Prepare(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs at least 2"), std::string::npos);
  o.val_fraction = 0.9;
  EXPECT_NE(Prepare(o).status().message().find("--val-fraction"), std::string::npos);
  o.val_fraction = 0.02;
  o.vocab_size = 10;
  EXPECT_NE(Prepare(o).status().message().find("vocab size 10"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
}

}  // namespace
}  // namespace anvil::data
