// Token shards: write/read round trips for both token widths, atomic
// creation, and clear errors for missing, truncated and corrupted files.
#include "anvil/data/shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "anvil/data/testing.h"

namespace anvil::data {
namespace {

std::vector<std::vector<uint32_t>> Docs(uint32_t vocab) {
  std::vector<std::vector<uint32_t>> docs;
  uint32_t v = 0;
  for (int d = 0; d < 7; ++d) {
    std::vector<uint32_t> doc(1 + d * 3);
    for (uint32_t& t : doc) t = (v += 7919) % vocab;
    docs.push_back(doc);
  }
  return docs;
}

ShardInfo Write(const std::string& path, uint32_t vocab,
                const std::vector<std::vector<uint32_t>>& docs) {
  auto w = ShardWriter::Create(path, vocab);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  for (const auto& d : docs) EXPECT_TRUE(w->AddDocument(d).ok());
  auto info = w->Finish();
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  return *info;
}

std::string OpenError(const std::string& path, bool verify = true) {
  auto s = TokenShard::Open(path, verify);
  EXPECT_FALSE(s.ok());
  return s.ok() ? "" : s.status().ToString();
}

TEST(Shard, RoundTripsBothTokenWidths) {
  testing::TempDir dir;
  for (const uint32_t vocab : {1000u, 65536u, 70000u}) {
    const auto docs = Docs(vocab);
    const std::string path = dir / "s.bin";
    const ShardInfo info = Write(path, vocab, docs);
    auto shard = TokenShard::Open(path);
    ASSERT_TRUE(shard.ok()) << shard.status().ToString();
    EXPECT_EQ(shard->token_bytes(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(shard->vocab_size(), vocab);
    EXPECT_EQ(shard->num_docs(), docs.size());
    EXPECT_EQ(shard->num_tokens(), info.num_tokens);
    EXPECT_EQ(shard->checksum(), info.checksum);
    EXPECT_EQ(std::filesystem::file_size(path), info.file_bytes);
    uint64_t at = 0;
    for (size_t d = 0; d < docs.size(); ++d) {
      EXPECT_EQ(shard->DocStart(d), at);
      std::vector<int32_t> got(docs[d].size());
      shard->CopyTokens(at, got.size(), got.data());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(uint32_t(got[i]), docs[d][i]);
        EXPECT_EQ(shard->Token(at + i), docs[d][i]);
        EXPECT_EQ(shard->DocOf(at + i), d);
      }
      at += docs[d].size();
    }
    EXPECT_EQ(shard->DocStart(docs.size()), shard->num_tokens());
  }
}

TEST(Shard, AppearsOnlyWhenFinished) {
  testing::TempDir dir;
  {
    auto w = ShardWriter::Create(dir / "s.bin", 100);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->AddDocument(std::vector<uint32_t>{1, 2, 3}).ok());
  }  // dropped without Finish
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  Write(dir / "s.bin", 100, {{1, 2}});
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            1);  // no temp file left
}

TEST(Shard, WriterRejectsBadDocuments) {
  testing::TempDir dir;
  auto w = ShardWriter::Create(dir / "s.bin", 100);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->AddDocument({}).ok());
  const Status s = w->AddDocument(std::vector<uint32_t>{5, 100});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("is 100, not below the vocab size 100"), std::string::npos);
  EXPECT_FALSE(ShardWriter::Create(dir / "nodir/s.bin", 100).ok());
}

TEST(Shard, CorruptionIsDetectedAndNamed) {
  testing::TempDir dir;
  const std::string path = dir / "train.bin";
  Write(path, 1000, Docs(1000));
  const std::string good = testing::ReadBytes(path);
  auto with = [&](std::string bytes) {
    testing::WriteBytes(path, bytes);
    return path;
  };
  std::string e = OpenError(dir / "missing.bin");
  EXPECT_NE(e.find("missing.bin: no such shard; re-run `anvil prepare`"), std::string::npos) << e;

  e = OpenError(with(good.substr(0, good.size() - 10)));
  EXPECT_NE(e.find(path + ": truncated: expected " + std::to_string(good.size()) + " bytes"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("found " + std::to_string(good.size() - 10)), std::string::npos) << e;
  e = OpenError(with(good.substr(0, 20)));
  EXPECT_NE(e.find("shorter than the 64-byte header"), std::string::npos) << e;
  e = OpenError(with(good + "x"));
  EXPECT_NE(e.find("trailing bytes"), std::string::npos) << e;

  std::string flipped = good;
  flipped[kShardHeaderBytes + 3] ^= 0x40;  // a token
  e = OpenError(with(flipped));
  EXPECT_NE(e.find(path + ": checksum mismatch"), std::string::npos) << e;
  // Without verification the same file opens (the index is intact).
  EXPECT_TRUE(TokenShard::Open(path, /*verify=*/false).ok());

  std::string header = good;
  header[24] ^= 1;  // num_tokens
  e = OpenError(with(header), /*verify=*/false);
  EXPECT_NE(e.find("header is corrupt"), std::string::npos) << e;

  std::string magic = good;
  magic[0] = 'X';
  e = OpenError(with(magic));
  EXPECT_NE(e.find("not an anvil token shard"), std::string::npos) << e;
}

}  // namespace
}  // namespace anvil::data
