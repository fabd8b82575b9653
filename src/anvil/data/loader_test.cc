// Loader: batches are a pure function of (seed, epoch, step, rank, world
// size); resuming from a saved position reproduces an uninterrupted run;
// ranks get disjoint windows; packed rows split exactly at document starts.
#include "anvil/data/loader.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "anvil/data/testing.h"

namespace anvil::data {
namespace {

constexpr uint32_t kBos = 1;

// Documents of varied lengths whose tokens encode their stream offset
// (token at offset g is g + 2, or kBos at a document start), so a batch
// tells where it came from.
class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto w = ShardWriter::Create(dir_ / "train.bin", 60000);
    ASSERT_TRUE(w.ok());
    uint32_t g = 0;
    for (int d = 0; d < 40; ++d) {
      std::vector<uint32_t> doc(3 + (d * 37) % 50);
      for (size_t i = 0; i < doc.size(); ++i, ++g) doc[i] = i == 0 ? kBos : g + 2;
      starts_.insert(g - static_cast<uint32_t>(doc.size()));
      ASSERT_TRUE(w->AddDocument(doc).ok());
    }
    ASSERT_TRUE(w->Finish().ok());
    auto s = TokenShard::Open(dir_ / "train.bin");
    ASSERT_TRUE(s.ok());
    shard_ = std::make_unique<TokenShard>(std::move(s).value());
  }

  Loader Make(LoaderConfig c, LoaderPosition p = {}) {
    auto l = Loader::Create(*shard_, c, p);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return std::move(l).value();
  }

  testing::TempDir dir_;
  std::unique_ptr<TokenShard> shard_;
  std::set<uint32_t> starts_;  // stream offsets where documents begin
};

LoaderConfig Config(int b, int t, uint64_t seed = 5) {
  LoaderConfig c;
  c.batch_size = b;
  c.seq_len = t;
  c.seed = seed;
  return c;
}

TEST_F(LoaderTest, WindowsAreContiguousAndTargetsShifted) {
  Loader loader = Make(Config(4, 16));
  EXPECT_EQ(loader.num_windows(), (shard_->num_tokens() - 1) / 16);
  const Batch& b = loader.Next();
  for (int r = 0; r < 4; ++r) {
    const uint64_t start = loader.WindowAt({0, 0}, r) * 16;
    std::vector<int32_t> want(17);
    shard_->CopyTokens(start, 17, want.data());
    EXPECT_EQ(std::vector<int32_t>(b.tokens.begin() + r * 17, b.tokens.begin() + r * 17 + 17),
              want);
    EXPECT_EQ(b.Targets(r)[0], b.Inputs(r)[1]);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(b.positions[r * 16 + i], i);
  }
  EXPECT_EQ(b.cu_seqlens, (std::vector<int32_t>{0, 16, 32, 48, 64}));
  EXPECT_EQ(b.max_seqlen, 16);
}

TEST_F(LoaderTest, DeterministicAndSeeded) {
  Loader a = Make(Config(3, 8)), b = Make(Config(3, 8)), c = Make(Config(3, 8, 6));
  bool differs = false;
  for (int s = 0; s < 10; ++s) {
    const std::vector<int32_t> ta = a.Next().tokens;
    EXPECT_EQ(b.Next().tokens, ta);
    differs |= c.Next().tokens != ta;
  }
  EXPECT_TRUE(differs);
}

TEST_F(LoaderTest, EachEpochVisitsEveryWindowOnceInANewOrder) {
  Loader loader = Make(Config(5, 8));
  const uint64_t k = loader.num_windows(), steps = loader.steps_per_epoch();
  ASSERT_EQ(steps, k / 5);
  std::vector<uint64_t> order[2];
  for (uint64_t e = 0; e < 2; ++e) {
    std::set<uint64_t> seen;
    for (uint64_t s = 0; s < steps; ++s) {
      for (int r = 0; r < 5; ++r) {
        const uint64_t w = loader.WindowAt({e, s}, r);
        EXPECT_LT(w, k);
        EXPECT_TRUE(seen.insert(w).second);
        order[e].push_back(w);
      }
    }
  }
  EXPECT_NE(order[0], order[1]);
}

TEST_F(LoaderTest, ResumeReproducesAnUninterruptedRun) {
  LoaderConfig c = Config(4, 12);
  c.mode = BatchMode::kPacked;
  Loader straight = Make(c);
  const uint64_t total = straight.steps_per_epoch() * 2 + 3;  // crosses two epoch ends
  std::vector<Batch> expected;
  for (uint64_t s = 0; s < total; ++s) expected.push_back(straight.Next());
  for (const uint64_t stop : {uint64_t{1}, straight.steps_per_epoch(), total - 2}) {
    Loader first = Make(c);
    for (uint64_t s = 0; s < stop; ++s) first.Next();
    const LoaderPosition saved = first.position();  // what a checkpoint stores
    Loader resumed = Make(c, saved);
    for (uint64_t s = stop; s < total; ++s) {
      const Batch& b = resumed.Next();
      EXPECT_EQ(b.position, expected[s].position);
      EXPECT_EQ(b.tokens, expected[s].tokens);
      EXPECT_EQ(b.positions, expected[s].positions);
      EXPECT_EQ(b.cu_seqlens, expected[s].cu_seqlens);
    }
  }
  EXPECT_EQ(expected[straight.steps_per_epoch()].position, (LoaderPosition{1, 0}));
}

TEST_F(LoaderTest, RanksGetDisjointWindows) {
  constexpr int kWorld = 3;
  std::vector<Loader> ranks;
  for (int r = 0; r < kWorld; ++r) {
    LoaderConfig c = Config(2, 8);
    c.rank = r;
    c.world_size = kWorld;
    ranks.push_back(Make(c));
  }
  const uint64_t steps = ranks[0].steps_per_epoch();
  EXPECT_EQ(steps, ranks[0].num_windows() / (2 * kWorld));
  std::set<uint64_t> seen;
  for (uint64_t s = 0; s < steps; ++s) {
    for (int r = 0; r < kWorld; ++r) {
      for (int row = 0; row < 2; ++row) {
        EXPECT_TRUE(seen.insert(ranks[r].WindowAt({0, s}, row)).second);
      }
      const Batch& b = ranks[r].Next();
      std::vector<int32_t> want(9);
      shard_->CopyTokens(ranks[r].WindowAt({0, s}, 0) * 8, 9, want.data());
      EXPECT_EQ(std::vector<int32_t>(b.tokens.begin(), b.tokens.begin() + 9), want);
    }
  }
  EXPECT_EQ(seen.size(), steps * 2 * kWorld);
}

TEST_F(LoaderTest, PackedRowsSplitAtDocumentStarts) {
  LoaderConfig c = Config(6, 24);
  c.mode = BatchMode::kPacked;
  Loader loader = Make(c);
  for (int s = 0; s < 5; ++s) {
    const Batch& b = loader.Next();
    std::vector<int32_t> want_cu = {0};
    int32_t want_max = 0;
    for (int r = 0; r < 6; ++r) {
      const uint64_t start = loader.WindowAt(b.position, r) * 24;
      int32_t seg = r * 24;
      for (int i = 0; i < 24; ++i) {
        const bool doc_start = starts_.count(static_cast<uint32_t>(start + i)) > 0;
        if (i > 0 && doc_start) {
          want_cu.push_back(r * 24 + i);
          want_max = std::max(want_max, r * 24 + i - seg);
          seg = r * 24 + i;
        }
        if (doc_start) {
          EXPECT_EQ(b.Inputs(r)[i], int32_t(kBos));
        }
        // Positions restart at a document start and at the row start.
        const int32_t p = b.positions[r * 24 + i];
        EXPECT_EQ(p, (i == 0 || doc_start) ? 0 : b.positions[r * 24 + i - 1] + 1);
      }
      want_cu.push_back(r * 24 + 24);
      want_max = std::max(want_max, r * 24 + 24 - seg);
    }
    EXPECT_EQ(b.cu_seqlens, want_cu);
    EXPECT_EQ(b.max_seqlen, want_max);
  }
}

TEST_F(LoaderTest, ValidationWalksWindowsInOrder) {
  LoaderConfig c = Config(4, 10).ForValidation();
  c.rank = 1;
  c.world_size = 2;
  Loader loader = Make(c);
  for (uint64_t s = 0; s < loader.steps_per_epoch(); ++s) {
    for (int r = 0; r < 4; ++r) EXPECT_EQ(loader.WindowAt({0, s}, r), (s * 2 + 1) * 4 + r);
  }
}

TEST_F(LoaderTest, RejectsImpossibleConfigs) {
  EXPECT_FALSE(Loader::Create(*shard_, Config(0, 8)).ok());
  LoaderConfig bad_rank = Config(2, 8);
  bad_rank.rank = 2;
  bad_rank.world_size = 2;
  EXPECT_FALSE(Loader::Create(*shard_, bad_rank).ok());
  auto too_big = Loader::Create(*shard_, Config(64, 512));
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("fewer than one global batch"), std::string::npos);
  EXPECT_NE(too_big.status().message().find("train.bin"), std::string::npos);
}

}  // namespace
}  // namespace anvil::data
