// Resume is bitwise: k steps, checkpoint, a fresh process-like trainer resumes
// to 2k; every loss, the final weights and the Adam moments equal those of an
// uninterrupted 2k-step run, for f32 and bf16 (and the resumed half runs on
// another thread count, which must not matter either).
#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <vector>

#include "anvil/train/trainer.h"
#include "train_testing.h"

namespace anvil::train {
namespace {

using testing::MicroConfig;
using testing::TempDir;

std::unique_ptr<Trainer> Make(Config config, const std::string& dir, bool resume) {
  auto t = Trainer::Create(std::move(config),
                           RunOptions{.run_dir = dir, .resume = resume, .peak_gflops = 1.0});
  CHECK(t.ok()) << t.status().ToString();
  return std::move(*t);
}

class ResumeTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ResumeTest, ResumeIsBitwise) {
  const std::string precision = GetParam();
  TempDir tmp("resume_" + precision);
  const std::string data_dir = tmp.path() + "/data";
  testing::WriteSyntheticData(data_dir);
  constexpr int kHalf = 4;

  std::vector<double> full_losses;
  auto full = Make(MicroConfig(data_dir, precision), tmp.path() + "/full", false);
  for (int i = 0; i < 2 * kHalf; ++i) full_losses.push_back(full->Step().loss);
  EXPECT_LT(full_losses.back(), full_losses.front());

  std::vector<double> split_losses;
  {
    auto first = Make(MicroConfig(data_dir, precision), tmp.path() + "/split", false);
    for (int i = 0; i < kHalf; ++i) split_losses.push_back(first->Step().loss);
    ASSERT_TRUE(first->SaveCheckpoint().ok());
    first->Step();  // work after the checkpoint is lost, as in a crash
  }
  auto second = Make(MicroConfig(data_dir, precision, {"train.threads=1"}), tmp.path() + "/split",
                     true);
  EXPECT_EQ(second->step(), kHalf);
  for (int i = 0; i < kHalf; ++i) split_losses.push_back(second->Step().loss);

  ASSERT_EQ(full_losses.size(), split_losses.size());
  for (size_t i = 0; i < full_losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&full_losses[i], &split_losses[i], sizeof(double)), 0)
        << "step " << i + 1 << ": " << full_losses[i] << " vs " << split_losses[i];
  }
  const auto a = full->model().params().weights();
  const auto b = second->model().params().weights();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << "final weights differ";
  EXPECT_EQ(std::memcmp(full->optimizer().m().data(), second->optimizer().m().data(),
                        a.size_bytes()),
            0);
  EXPECT_EQ(std::memcmp(full->optimizer().v().data(), second->optimizer().v().data(),
                        a.size_bytes()),
            0);
  EXPECT_EQ(full->Evaluate().val_loss, second->Evaluate().val_loss);
}

INSTANTIATE_TEST_SUITE_P(Precisions, ResumeTest,
                         ::testing::Values("f32", "bf16", "fp8-tensor", "fp8-delayed", "fp8-block",
                                           "mxfp8"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace anvil::train
