// Trainer tests: config errors name the key, metrics.jsonl has every field,
// Run() validates, checkpoints (keep-last-N) and stops cleanly on request,
// the trace is valid Chrome JSON with a zone for every model block and
// kernel family inside the steps, and a run folder is not silently
// overwritten.
#include "anvil/train/trainer.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "anvil/core/file_util.h"
#include "anvil/io/checkpoint.h"
#include "anvil/train/time_budget.h"
#include "train_testing.h"

namespace anvil::train {
namespace {

using testing::MicroConfig;
using testing::TempDir;

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteSyntheticData(data_dir_); }
  TempDir tmp_{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::string data_dir_ = tmp_.path() + "/data";
  std::string run_ = tmp_.path() + "/run";
};

TEST_F(TrainerTest, UnknownKeyIsNamed) {
  auto t = Trainer::Create(MicroConfig(data_dir_, "f32", {"train.stepz=3"}),
                           RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("train.stepz"), std::string::npos) << t.status().message();
}

TEST_F(TrainerTest, BadValuesAreNamed) {
  auto t = Trainer::Create(MicroConfig(data_dir_, "f32", {"train.grad_accum=0"}),
                           RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("train.grad_accum"), std::string::npos);
  auto head =
      Trainer::Create(MicroConfig(data_dir_, "fp8-block", {"train.fp8_high_precision=\"f16\""}),
                      RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("train.fp8_high_precision"), std::string::npos);
  auto missing = Trainer::Create(MicroConfig(data_dir_, "f32", {"data.dir=\"/nonexistent\""}),
                                 RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/train.bin"), std::string::npos)
      << missing.status().message();
}

// A peak measured while another process held the cores reads too low, and
// the steps then outrun it (MFU over 1): measured again, once, and the
// larger kept, in the metrics and machine.json.
TEST_F(TrainerTest, AStepThatOutrunsTheMeasuredPeakMeasuresItAgain) {
  int measured = 0;
  const auto measure = [&](ThreadPool&) {
    ++measured;
    profile::PeakFlops p;
    p.f32_gflops = p.bf16_gflops = p.bf16_dot_gflops = measured == 1 ? 1e-9 : 1e6;
    return p;
  };
  auto t = Trainer::Create(MicroConfig(data_dir_, "f32", {"train.steps=3"}),
                           RunOptions{.run_dir = run_, .measure_peak = measure});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  std::vector<double> mfu;
  std::string messages;
  auto summary =
      (*t)->Run(Hooks{.on_step = [&](const StepMetrics& m) { mfu.push_back(m.mfu); },
                      .on_message = [&](const std::string& m) { messages += m + "\n"; }});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(measured, 2);
  ASSERT_EQ(mfu.size(), 3u);
  for (const double v : mfu) EXPECT_LT(v, 1.0);
  EXPECT_NE(messages.find("measured again: 1000000.0 GFLOP/s"), std::string::npos) << messages;
  EXPECT_EQ((*t)->peak_gflops(), 1e6);
  const auto machine = ReadFile(run_ + "/machine.json");
  ASSERT_TRUE(machine.ok());
  const nlohmann::json j = nlohmann::json::parse(*machine);
  EXPECT_EQ(j["peak_gflops"].get<double>(), 1e6) << *machine;
  EXPECT_EQ(j["peak_source"].get<std::string>(), "measured again at step 1 (startup: 0.0)");
}

TEST_F(TrainerTest, RunWritesMetricsCheckpointsAndTrace) {
  auto t = Trainer::Create(MicroConfig(data_dir_, "f32", {"train.checkpoint_every=2"}),
                           RunOptions{.run_dir = run_, .trace = true, .peak_gflops = 1});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  int steps = 0, evals = 0;
  auto summary = (*t)->Run(Hooks{.on_step = [&](const StepMetrics&) { ++steps; },
                                 .on_eval = [&](const EvalMetrics&) { ++evals; }});
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(steps, 8);
  EXPECT_EQ(evals, 2);  // eval_every = 4
  EXPECT_EQ(summary->steps_done, 8);
  ASSERT_TRUE(summary->final_val_loss.has_value());
  EXPECT_EQ(summary->checkpoint, run_ + "/step_8");

  // metrics.jsonl: one line per step with every field, plus val_loss lines.
  std::ifstream in(run_ + "/metrics.jsonl");
  std::string line;
  int step_lines = 0, val_lines = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("val_loss")) {
      ++val_lines;
      continue;
    }
    ++step_lines;
    for (const char* key : {"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu",
                            "mem_high_water"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
    }
    EXPECT_GT(j["mem_high_water"].get<int64_t>(), 0);
    EXPECT_GT(j["mfu"].get<double>(), 0);
  }
  EXPECT_EQ(step_lines, 8);
  EXPECT_EQ(val_lines, 2);

  // Checkpoints every 2 steps, the newest 2 kept, all verifiable.
  EXPECT_EQ(io::ListCheckpoints(run_), (std::vector<int64_t>{6, 8}));
  auto info = io::OpenCheckpoint(run_);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->step, 8);
  for (const char* f : {"model.safetensors", "config.json", "optimizer.safetensors",
                        "trainer_state.json", "config.toml", "manifest.json"}) {
    EXPECT_TRUE(std::filesystem::exists(info->dir + "/" + f)) << f;
  }
  EXPECT_TRUE(std::filesystem::exists(run_ + "/config.toml"));

  // The trace: Chrome JSON with complete events of the traced steps.
  auto text = ReadFile(run_ + "/trace.json");
  ASSERT_TRUE(text.ok());
  const nlohmann::json trace = nlohmann::json::parse(*text);
  int step_events = 0, total = 0;
  std::set<std::string> names;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    ++total;
    EXPECT_TRUE(e.contains("ts") && e.contains("dur") && e.contains("tid") && e.contains("name"));
    step_events += e.at("name") == "step";
    names.insert(e.at("name").get<std::string>());
  }
  EXPECT_EQ(step_events, 3);  // train.trace_steps
  EXPECT_GT(total, step_events);
  // Inside a step: the model's blocks and every kernel family they call.
  for (const char* zone : {"forward_backward", "attention_block_fwd", "attention_block_bwd",
                           "mlp_block_fwd", "mlp_block_bwd", "head_fwd", "head_bwd", "gemm_f32",
                           "attention_fwd", "attention_bwd", "rmsnorm_fwd", "rmsnorm_bwd",
                           "rope_fwd", "rope_bwd", "swiglu_fwd", "swiglu_bwd", "xent_fwd",
                           "xent_bwd", "embedding_fwd", "embedding_bwd", "adamw_update"}) {
    EXPECT_TRUE(names.count(zone)) << "no \"" << zone << "\" zone in the trace";
  }
}

TEST_F(TrainerTest, StopRequestCheckpointsAndResumeFinishes) {
  {
    auto t = Trainer::Create(MicroConfig(data_dir_, "f32"), RunOptions{.run_dir = run_, .peak_gflops = 1});
    ASSERT_TRUE(t.ok());
    int steps = 0;
    auto summary = (*t)->Run(Hooks{.on_step = [&](const StepMetrics&) { ++steps; },
                                   .stop_requested = [&] { return steps >= 3; }});
    ASSERT_TRUE(summary.ok());
    EXPECT_TRUE(summary->interrupted);
    EXPECT_EQ(summary->steps_done, 3);
    EXPECT_EQ(io::OpenCheckpoint(run_)->step, 3);
  }
  // A fresh start in the same folder is refused; a resume finishes the run.
  auto again = Trainer::Create(MicroConfig(data_dir_, "f32"), RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--resume"), std::string::npos);
  auto resumed = Trainer::Create(MicroConfig(data_dir_, "f32"),
                                 RunOptions{.run_dir = run_, .resume = true, .peak_gflops = 1});
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  auto summary = (*resumed)->Run({});
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->first_step, 3);
  EXPECT_EQ(summary->steps_done, 8);
  // metrics.jsonl continues: steps 1..8 once each.
  std::ifstream in(run_ + "/metrics.jsonl");
  std::string line;
  std::vector<int64_t> steps;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (!j.contains("val_loss")) steps.push_back(j["step"].get<int64_t>());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(TrainerTest, ResumeRefusesOtherDataOrPrecision) {
  {
    auto t = Trainer::Create(MicroConfig(data_dir_, "f32", {"train.steps=2"}),
                             RunOptions{.run_dir = run_, .peak_gflops = 1});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->Run({}).ok());
  }
  auto resume = [&](const std::string& data_dir, const std::string& precision) {
    return Trainer::Create(MicroConfig(data_dir, precision, {"train.steps=3"}),
                           RunOptions{.run_dir = run_, .resume = true, .peak_gflops = 1});
  };
  auto bf16 = resume(data_dir_, "bf16");
  ASSERT_FALSE(bf16.ok());
  EXPECT_NE(bf16.status().message().find("trained in f32 precision"), std::string::npos)
      << bf16.status().message();
  // The refused settings were not saved: `anvil train --resume` reads this file.
  const auto saved = ReadFile(run_ + "/config.toml");
  ASSERT_TRUE(saved.ok());
  EXPECT_NE(saved->find("precision = 'f32'"), std::string::npos) << *saved;

  // The same training shard with another validation shard.
  const std::string other = tmp_.path() + "/other_data";
  std::filesystem::create_directories(other);
  std::filesystem::copy_file(data_dir_ + "/train.bin", other + "/train.bin");
  testing::WriteShard(other + "/val.bin", 8, 100, 99);
  auto other_val = resume(other, "f32");
  ASSERT_FALSE(other_val.ok());
  EXPECT_NE(other_val.status().message().find("val_shard_checksum"), std::string::npos)
      << other_val.status().message();

  auto same = resume(data_dir_, "f32");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
}

// FP8: the format of the GEMMs kept out of FP8 is the run's throughout. A
// resume that asks for the other is refused; one from before the format was
// recorded (no key in config.toml or trainer_state.json) goes on in f32, as
// it ran, even where `auto` would pick bf16.
TEST_F(TrainerTest, ResumeKeepsTheFp8KeptFormat) {
  {
    auto t = Trainer::Create(
        MicroConfig(data_dir_, "fp8-block", {"train.steps=2", "train.fp8_high_precision=\"f32\""}),
        RunOptions{.run_dir = run_, .peak_gflops = 1});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->Run({}).ok());
  }
  auto other = Trainer::Create(
      MicroConfig(data_dir_, "fp8-block", {"train.steps=3", "train.fp8_high_precision=\"bf16\""}),
      RunOptions{.run_dir = run_, .resume = true, .peak_gflops = 1});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("train.fp8_high_precision = \"f32\""), std::string::npos)
      << other.status().message();

  // An older run: neither file names the format (step_2 sealed again
  // without the key in trainer_state.json).
  const std::string step_dir = run_ + "/step_2";
  auto writer = io::CheckpointWriter::Begin(run_, 2);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  for (const auto& entry : std::filesystem::directory_iterator(step_dir)) {
    const std::string name = entry.path().filename().string();
    if (name == io::kManifestFile) continue;
    auto text = ReadFile(entry.path().string());
    ASSERT_TRUE(text.ok());
    if (name == "trainer_state.json") {
      nlohmann::json j = nlohmann::json::parse(*text);
      ASSERT_TRUE(j.contains("fp8_high_precision"));
      j.erase("fp8_high_precision");
      *text = j.dump();
    }
    ASSERT_TRUE(WriteFileAtomic(writer->Path(name), *text).ok());
  }
  ASSERT_TRUE(writer->Commit().ok());
  std::string toml = testing::MicroToml(data_dir_, "fp8-block");
  const std::string pinned = "fp8_high_precision = \"bf16\"\n";
  ASSERT_NE(toml.find(pinned), std::string::npos);
  toml.erase(toml.find(pinned), pinned.size());
  auto config = Config::FromString(toml, "micro.toml");
  ASSERT_TRUE(config.ok());
  ASSERT_TRUE(config->Set("train.steps=3").ok());
  auto old = Trainer::Create(std::move(*config), RunOptions{.run_dir = run_, .resume = true});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_FALSE((*old)->model().params().has_bf16());
  EXPECT_NE((*old)->resolved_config().find("fp8_high_precision = 'f32'"), std::string::npos);
}

// mxfp8's E8M0 scale rule is part of the recipe: NVIDIA's round-up
// (train.fp8_mx_scale = "round_up") trains other weights than the MX spec's
// rule from the same start, a run records the rule it ran, and a resume that
// asks for the other is refused.
TEST_F(TrainerTest, MxScaleRuleIsARecipeSetting) {
  std::vector<std::vector<float>> weights;
  for (const char* rule : {"ocp", "round_up"}) {
    const std::string dir = run_ + "_" + rule;
    auto t = Trainer::Create(
        MicroConfig(data_dir_, "mxfp8",
                    {"train.steps=2", fmt::format("train.fp8_mx_scale=\"{}\"", rule)}),
        RunOptions{.run_dir = dir, .peak_gflops = 1});
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*t)->Run({}).ok());
    EXPECT_NE((*t)->resolved_config().find(fmt::format("fp8_mx_scale = '{}'", rule)),
              std::string::npos);
    const auto w = (*t)->model().params().weights();
    weights.emplace_back(w.begin(), w.end());
  }
  ASSERT_EQ(weights[0].size(), weights[1].size());
  EXPECT_NE(std::memcmp(weights[0].data(), weights[1].data(), weights[0].size() * sizeof(float)),
            0);
  auto other = Trainer::Create(
      MicroConfig(data_dir_, "mxfp8", {"train.steps=3", "train.fp8_mx_scale=\"ocp\""}),
      RunOptions{.run_dir = run_ + "_round_up", .resume = true, .peak_gflops = 1});
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("train.fp8_mx_scale = 'round_up' (now: 'ocp')"),
            std::string::npos)
      << other.status().message();
  auto bad = Trainer::Create(MicroConfig(data_dir_, "mxfp8", {"train.fp8_mx_scale=\"up\""}),
                             RunOptions{.run_dir = run_ + "_bad", .peak_gflops = 1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected \"ocp\" or \"round_up\""), std::string::npos);
}

// A time budget lowers train.steps after a few steps timed inside the warmup;
// the run is then bitwise the run configured with the fitted steps (the
// measured steps' LR does not depend on the step count), and config.toml
// says what ran, so a resume continues the fitted schedule.
TEST_F(TrainerTest, TimeBudgetFitsTheScheduleAndMatchesThatRun) {
  const std::vector<std::string> common = {"optim.warmup_steps=50", "train.eval_every=0",
                                           "train.time_budget_refit=false"};
  std::vector<std::string> budget = common;
  budget.push_back("train.steps=1000000");
  budget.push_back("train.time_budget_minutes=0.005");  // 0.3 s
  auto a = Trainer::Create(MicroConfig(data_dir_, "f32", budget),
                           RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<double> losses_a;
  std::string said;
  int64_t told_total = 0;
  auto sa = (*a)->Run(Hooks{.on_step = [&](const StepMetrics& m) { losses_a.push_back(m.loss); },
                            .on_message = [&](const std::string& text) { said += text + "\n"; },
                            .on_schedule = [&](int64_t total) { told_total = total; }});
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  const int64_t fitted = (*a)->train_config().steps;
  EXPECT_LT(fitted, 1000000);
  EXPECT_GT(fitted, BudgetTiming::kMinSteps + 1);
  EXPECT_EQ(told_total, fitted);
  EXPECT_EQ(sa->steps_done, fitted);
  EXPECT_NE(said.find("schedule fitted: train.steps 1000000 -> " + std::to_string(fitted)),
            std::string::npos)
      << said;
  const auto saved = ReadFile(run_ + "/config.toml");
  ASSERT_TRUE(saved.ok());
  EXPECT_NE(saved->find("\nsteps = " + std::to_string(fitted) + "\n"), std::string::npos) << *saved;

  std::vector<std::string> fixed = common;
  fixed.push_back("train.steps=" + std::to_string(fitted));
  auto b = Trainer::Create(MicroConfig(data_dir_, "f32", fixed),
                           RunOptions{.run_dir = tmp_.path() + "/fixed", .peak_gflops = 1});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  std::vector<double> losses_b;
  ASSERT_TRUE((*b)->Run(Hooks{.on_step = [&](const StepMetrics& m) { losses_b.push_back(m.loss); }}).ok());
  ASSERT_EQ(losses_a.size(), losses_b.size());
  for (size_t i = 0; i < losses_a.size(); ++i) {
    ASSERT_EQ(std::memcmp(&losses_a[i], &losses_b[i], sizeof(double)), 0) << "step " << i + 1;
  }
  const auto wa = (*a)->model().params().weights();
  const auto wb = (*b)->model().params().weights();
  EXPECT_EQ(std::memcmp(wa.data(), wb.data(), wa.size_bytes()), 0) << "final weights differ";
}

// A machine that slows down after the fit (here: every step after it waits
// twice its own time more) would run past the budget; the checks of the fit lower
// train.steps and the run still ends its (new) schedule instead of being cut.
// The budget (3 s) leaves a slow build (sanitizers, a loaded host) dozens of
// steps after the fit, so there are checks to make.
TEST_F(TrainerTest, TimeBudgetRefitFollowsASlowerMachine) {
  auto a = Trainer::Create(
      MicroConfig(data_dir_, "f32",
                  {"optim.warmup_steps=50", "train.eval_every=0", "train.steps=1000000",
                   "train.time_budget_minutes=0.05"}),  // 3 s
      RunOptions{.run_dir = run_, .peak_gflops = 1});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::string said;
  int64_t told_total = 0;
  bool fitted = false;
  auto s = (*a)->Run(Hooks{
      .on_step =
          [&](const StepMetrics& m) {  // 3x slower (any build type)
            if (fitted) {
              std::this_thread::sleep_for(std::chrono::duration<double>(2 * m.seconds + 1e-3));
            }
          },
      .on_message =
          [&](const std::string& text) {
            said += text + "\n";
            fitted = fitted || text.find("schedule fitted") != std::string::npos;
          },
      .on_schedule = [&](int64_t total) { told_total = total; }});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(fitted) << said;
  const size_t first = said.find("schedule fitted: train.steps 1000000 -> ");
  ASSERT_NE(first, std::string::npos) << said;
  const int64_t first_fit = std::stoll(said.substr(first + 40));
  // The fit is made after BudgetTiming's steps (at most kMaxSteps after the first).
  if (first_fit < BudgetTiming::kMaxSteps + 1 + 10) {
    GTEST_SKIP() << "this build's steps are too slow for a 3 s budget to leave 10 steps after "
                    "the fit: "
                 << said;
  }
  const int64_t steps = (*a)->train_config().steps;
  EXPECT_LT(steps, first_fit) << said;
  EXPECT_NE(said.find("checked again; schedule refitted: train.steps "), std::string::npos) << said;
  EXPECT_EQ(told_total, steps);
  EXPECT_EQ(s->steps_done, steps);
  const auto saved = ReadFile(run_ + "/config.toml");
  ASSERT_TRUE(saved.ok());
  EXPECT_NE(saved->find("\nsteps = " + std::to_string(steps) + "\n"), std::string::npos) << *saved;
}

}  // namespace
}  // namespace anvil::train
