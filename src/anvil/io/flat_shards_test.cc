// Flat shard files: any range reads back from any cut of the layout; a gap,
// an overlap or another layout's file is an error naming the problem.
#include "anvil/io/flat_shards.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <vector>

namespace anvil::io {
namespace {
namespace fs = std::filesystem;

class FlatShardsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        (fs::temp_directory_path() / ("anvil_flat_shards_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    data_.resize(kSize);
    std::iota(data_.begin(), data_.end(), 100.0f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the cut [cuts[i], cuts[i + 1]) of the layout, one file each.
  std::vector<std::string> Write(const std::vector<int64_t>& cuts) {
    std::vector<std::string> paths;
    const int ranks = static_cast<int>(cuts.size()) - 1;
    for (int r = 0; r < ranks; ++r) {
      paths.push_back(dir_ + "/" + ShardFileName("w", r, ranks));
      const FlatPart part[] = {{"x", data_.data() + cuts[r]}};
      EXPECT_TRUE(WriteFlatShard(paths.back(), kSize, cuts[r], cuts[r + 1], part, {}).ok());
    }
    return paths;
  }

  static constexpr int64_t kSize = 10;
  std::string dir_;
  std::vector<float> data_;
};

TEST_F(FlatShardsTest, AnyRangeFromAnyCut) {
  const std::vector<std::string> paths = Write({0, 3, 7, 10});
  EXPECT_EQ(ShardFiles(dir_, "w"), paths);
  EXPECT_EQ(ShardFileName("w", 2, 3), "w-00002-of-00003.safetensors");
  EXPECT_EQ(ShardFileName("w", 0, 1), "w.safetensors");
  for (const auto& [begin, end] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 10}, {2, 9}, {3, 7}, {5, 5}}) {
    std::vector<float> out(end - begin, -1.0f);
    const FlatTarget target[] = {{"x", out.data()}};
    ASSERT_TRUE(ReadFlatRange(paths, kSize, begin, end, target).ok()) << begin << ", " << end;
    EXPECT_EQ(out, std::vector<float>(data_.begin() + begin, data_.begin() + end));
  }
}

TEST_F(FlatShardsTest, GapsOverlapsAndOtherLayoutsAreErrors) {
  std::vector<std::string> paths = Write({0, 3, 7, 10});
  std::vector<float> out(kSize);
  const FlatTarget target[] = {{"x", out.data()}};
  const std::vector<std::string> gap = {paths[0], paths[2]};
  const Status missing = ReadFlatRange(gap, kSize, 0, kSize, target);
  EXPECT_NE(missing.message().find("cover 6 of the 10"), std::string::npos) << missing.message();
  // A gap and an overlap of the same size are still caught.
  std::vector<std::string> gap_and_overlap = {paths[0], paths[0], paths[2]};
  EXPECT_FALSE(
      ReadFlatRange(std::vector<std::string>{paths[0], paths[2], paths[2]}, kSize, 0, 6, target)
          .ok());
  EXPECT_FALSE(ReadFlatRange(gap_and_overlap, kSize, 0, kSize, target).ok());
  std::vector<std::string> twice = paths;
  twice.push_back(paths[1]);
  EXPECT_FALSE(ReadFlatRange(twice, kSize, 0, kSize, target).ok());
  const Status other = ReadFlatRange(paths, kSize + 1, 0, kSize, target);
  EXPECT_NE(other.message().find("layout"), std::string::npos) << other.message();
  const FlatTarget absent[] = {{"y", out.data()}};
  EXPECT_FALSE(ReadFlatRange(paths, kSize, 0, kSize, absent).ok());
}

}  // namespace
}  // namespace anvil::io
