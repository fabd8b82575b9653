// Tests of checkpoint folders: publish and verify, a crash before the rename
// leaves the previous checkpoint loadable, corruption is detected with the
// file named, keep-last-N pruning, and path resolution through `latest`.
#include "anvil/io/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "anvil/core/file_util.h"

namespace anvil::io {
namespace {
namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = (fs::temp_directory_path() / ("anvil_ckpt_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(run_);
    fs::create_directories(run_);
  }
  void TearDown() override { fs::remove_all(run_); }

  std::string Save(int64_t step, const std::string& payload) {
    auto w = CheckpointWriter::Begin(run_, step);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_TRUE(WriteFileAtomic(w->Path("a.bin"), payload).ok());
    EXPECT_TRUE(WriteFileAtomic(w->Path("b.json"), "{\"step\": " + std::to_string(step) + "}").ok());
    auto dir = w->Commit();
    EXPECT_TRUE(dir.ok()) << dir.status().ToString();
    return dir.ok() ? *dir : "";
  }
  std::string run_;
};

TEST_F(CheckpointTest, CommitPublishesAndVerifies) {
  const std::string dir = Save(5, "hello");
  EXPECT_EQ(dir, run_ + "/step_5");
  EXPECT_FALSE(fs::exists(run_ + "/step_5.tmp"));
  auto info = OpenCheckpoint(dir);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 5);
  // Through the run folder and the latest file.
  auto via_run = OpenCheckpoint(run_);
  ASSERT_TRUE(via_run.ok()) << via_run.status().ToString();
  EXPECT_EQ(via_run->dir, run_ + "/step_5");
  auto via_latest = OpenCheckpoint(run_ + "/latest");
  ASSERT_TRUE(via_latest.ok());
  EXPECT_EQ(via_latest->step, 5);
}

TEST_F(CheckpointTest, CrashBeforeRenameKeepsPreviousLoadable) {
  Save(1, "one");
  {
    auto w = CheckpointWriter::Begin(run_, 2);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(WriteFileAtomic(w->Path("a.bin"), "two, half written").ok());
    // "Crash": never committed.
  }
  EXPECT_TRUE(fs::exists(run_ + "/step_2.tmp"));
  auto info = OpenCheckpoint(run_);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 1);
  EXPECT_EQ(ListCheckpoints(run_), std::vector<int64_t>{1});
  // The next save of that step replaces the leftover.
  Save(2, "two");
  EXPECT_EQ(OpenCheckpoint(run_)->step, 2);
  EXPECT_EQ(*ReadFile(run_ + "/step_2/a.bin"), "two");
}

// Writing step 2 again moves the old folder aside before the new one takes
// its name: a crash between the two leaves `latest` naming a folder that is
// not there, and the one set aside loads.
TEST_F(CheckpointTest, CrashWhileReplacingLoadsTheOneSetAside) {
  Save(2, "two");
  fs::rename(run_ + "/step_2", run_ + "/step_2.replaced");
  auto info = OpenCheckpoint(run_);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 2);
  EXPECT_EQ(*ReadFile(info->dir + "/a.bin"), "two");
  Save(2, "two again");
  EXPECT_EQ(*ReadFile(OpenCheckpoint(run_)->dir + "/a.bin"), "two again");
  EXPECT_FALSE(fs::exists(run_ + "/step_2.replaced"));
}

TEST_F(CheckpointTest, CorruptFileIsNamed) {
  const std::string dir = Save(3, "payload bytes");
  {
    std::fstream f(dir + "/a.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2);
    f.put('X');
  }
  auto info = OpenCheckpoint(dir);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find(dir + "/a.bin"), std::string::npos)
      << info.status().message();

  // Truncation and a missing file are named too.
  { std::ofstream f(dir + "/a.bin", std::ios::trunc); }
  auto truncated = OpenCheckpoint(dir);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("a.bin"), std::string::npos);
  fs::remove(dir + "/b.json");
  auto missing = OpenCheckpoint(dir);
  ASSERT_FALSE(missing.ok());
}

// A model load (CheckpointRead::kModel) skips the optimizer state's
// checksums, which only a resume reads, but still checks its size; the
// model's files are verified either way.
TEST_F(CheckpointTest, ModelLoadsVerifyAllButTheOptimizerState) {
  const auto save = [&](int64_t step) {
    auto w = CheckpointWriter::Begin(run_, step);
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE(WriteFileAtomic(w->Path("model.safetensors"), "weights").ok());
    EXPECT_TRUE(WriteFileAtomic(w->Path("optimizer-00000-of-00002.safetensors"), "moments").ok());
    auto committed = w->Commit();
    EXPECT_TRUE(committed.ok());
    return committed.ok() ? *committed : std::string();
  };
  const auto flip = [](const std::string& path) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1);
    f.put('#');
  };
  const std::string model_flipped = save(5);
  flip(model_flipped + "/model.safetensors");
  const auto model = OpenCheckpoint(model_flipped, CheckpointRead::kModel);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("model.safetensors"), std::string::npos);

  const std::string dir = save(4);
  flip(dir + "/optimizer-00000-of-00002.safetensors");
  EXPECT_TRUE(OpenCheckpoint(dir, CheckpointRead::kModel).ok());
  const auto resume = OpenCheckpoint(dir, CheckpointRead::kAll);
  ASSERT_FALSE(resume.ok());
  EXPECT_NE(resume.status().message().find("optimizer-00000-of-00002"), std::string::npos);
  {  // a truncated optimizer file: even a model load refuses
    std::ofstream f(dir + "/optimizer-00000-of-00002.safetensors", std::ios::trunc);
  }
  const auto truncated = OpenCheckpoint(dir, CheckpointRead::kModel);
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("bytes, the manifest says"), std::string::npos);
}

TEST_F(CheckpointTest, KeepLastN) {
  for (int s = 1; s <= 5; ++s) Save(s * 10, "x");
  ASSERT_TRUE(PruneCheckpoints(run_, 2).ok());
  EXPECT_EQ(ListCheckpoints(run_), (std::vector<int64_t>{40, 50}));
  EXPECT_EQ(OpenCheckpoint(run_)->step, 50);
  ASSERT_TRUE(PruneCheckpoints(run_, 0).ok());  // keep all
  EXPECT_EQ(ListCheckpoints(run_).size(), 2u);
}

TEST_F(CheckpointTest, MissingCheckpointIsNotFound) {
  auto info = OpenCheckpoint(run_);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find(run_), std::string::npos);
  EXPECT_FALSE(OpenCheckpoint(run_ + "/nope").ok());
}

}  // namespace
}  // namespace anvil::io
