// The sft and rl runs on a micro model and 1-digit addition: SFT lowers the
// answer loss and writes a self-contained checkpoint; GRPO from it keeps the
// rollout and trainer log-probabilities equal bit for bit at every step; both
// resume bitwise (a run stopped halfway and resumed ends with the same weights
// and optimizer state as one that ran through); bad starts are refused. PPO
// with two passes of two updates a step keeps the first update's
// log-probabilities exact too, and resumes its value head (and a separate
// critic model) bitwise.
// Asynchronous rollouts are one step stale after the first step, weighted
// by their importance ratios, and resume bitwise from their snapshot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "anvil/core/file_util.h"
#include "anvil/data/testing.h"
#include "anvil/rl/policy_testing.h"
#include "anvil/rl/rl_run.h"
#include "anvil/rl/sft.h"

namespace anvil::rl {
namespace {

constexpr char kMicroModel[] = R"(
[model]
dim = 32
n_layers = 2
n_heads = 2
n_kv_heads = 1
ffn_dim = 64
vocab_size = 259
max_seq_len = 16
[task]
name = "addition"
digits = 1
)";

Config SftConfig() {
  auto c = Config::FromString(std::string(kMicroModel) + R"(
[sft]
steps = 30
batch_size = 16
eval_every = 0
eval_problems = 16
checkpoint_every = 15
keep_checkpoints = 0
threads = 2
max_new = 4
[optim]
lr = 3e-3
warmup_steps = 5
)", "sft test");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

Config RlConfig(const std::string& init) {
  auto c = Config::FromString(R"(
[task]
name = "addition"
digits = 1
[rl]
init = ")" + init + R"("
steps = 6
prompts_per_step = 4
group_size = 4
eval_every = 0
eval_problems = 8
checkpoint_every = 3
keep_checkpoints = 0
threads = 2
max_new = 4
[optim]
lr = 1e-3
warmup_steps = 0
min_lr_ratio = 1.0
)", "rl test");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return *c;
}

std::vector<nlohmann::json> MetricsLines(const std::string& run_dir) {
  auto text = ReadFile(run_dir + "/metrics.jsonl");
  EXPECT_TRUE(text.ok());
  std::vector<nlohmann::json> lines;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The weights and optimizer state of RUN/step_<step>.
std::string State(const std::string& run_dir, int64_t step) {
  const std::string dir = run_dir + "/step_" + std::to_string(step);
  auto weights = ReadFile(dir + "/model.safetensors");
  auto optimizer = ReadFile(dir + "/optimizer.safetensors");
  EXPECT_TRUE(weights.ok() && optimizer.ok()) << dir;
  return *weights + *optimizer;
}

// metrics.jsonl without its timings and memory figures.
std::vector<nlohmann::json> UntimedMetrics(const std::string& run_dir) {
  std::vector<nlohmann::json> lines = MetricsLines(run_dir);
  for (nlohmann::json& line : lines) {
    for (auto it = line.begin(); it != line.end();) {
      const std::string& key = it.key();
      const bool timing = key.find("seconds") != std::string::npos ||
                          key.find("per_s") != std::string::npos ||
                          key.find("wait") != std::string::npos || key == "mem_high_water";
      it = timing ? line.erase(it) : std::next(it);
    }
  }
  return lines;
}

// A stop request once `steps` steps are done in this session.
std::function<bool()> StopAfter(const int64_t& done, int64_t steps) {
  return [&done, steps] { return done >= steps; };
}

// Whether `s` is CheckResumedRecipe's refusal naming `key`.
bool Refuses(const Status& s, const std::string& key) {
  return s.message().find("a resume continues the run only") != std::string::npos &&
         s.message().find(key) != std::string::npos;
}

// A bad rl setting is refused before anything loads, naming that key and
// no other.
TEST(PostRunTest, EachBadRlSettingIsNamedAlone) {
  const std::vector<std::string> keys = {
      "rl.epochs",          "rl.minibatches",      "rl.critic",
      "rl.critic_lr_ratio", "rl.max_staleness",    "rl.rollout_threads",
      "rl.gamma",           "rl.gae_lambda",       "rl.value_clip",
      "rl.vf_coef",         "rl.reward_timeout_s", "rl.reward_at_once",
      "rl.page_rows"};
  const std::pair<const char*, const char*> bad[] = {
      {"rl.epochs", "0"},          {"rl.minibatches", "17"},      {"rl.critic", "\"own\""},
      {"rl.critic_lr_ratio", "0"}, {"rl.max_staleness", "2"},     {"rl.rollout_threads", "0"},
      {"rl.gamma", "0"},           {"rl.gae_lambda", "1.5"},      {"rl.value_clip", "-1"},
      {"rl.vf_coef", "0"},         {"rl.reward_timeout_s", "-1"}, {"rl.reward_at_once", "0"},
      {"rl.page_rows", "100"}};
  for (const auto& [key, value] : bad) {
    Config c = RlConfig("/nonexistent");
    ASSERT_TRUE(c.Set(std::string(key) + "=" + value).ok()) << key;
    const auto refused = RunRl(c, {.run_dir = "/nonexistent/run"}, {});
    ASSERT_FALSE(refused.ok()) << key;
    const std::string& message = refused.status().message();
    EXPECT_EQ(message.rfind(std::string(key) + " = ", 0), 0u) << message;
    for (const std::string& other : keys) {
      if (other != key) {
        EXPECT_EQ(message.find(other + " "), std::string::npos) << message;
      }
    }
  }
}

// SFT's loss is on the answer and eos only: no prompt position has a
// target, each answer position's is the next token, and the padding has none.
TEST(PostRunTest, SftTargetsAreTheAnswersOnly) {
  auto policy = testing::NewMicroPolicy();
  ASSERT_TRUE(policy.ok()) << policy.status().ToString();
  const TaskConfig task{.task = Task::kAddition, .digits = 3};
  const int64_t rows = 4, first = 7, t_len = policy->config.max_seq_len;
  SftBatch b;
  ASSERT_TRUE(FillSftBatch(*policy, task, first, rows, b).ok());
  int64_t answers = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const Problem p = MakeProblem(task, Split::kTrain, static_cast<uint64_t>(first + r));
    std::vector<int32_t> seq = policy->PromptTokens(p.prompt);
    const int64_t prompt_len = static_cast<int64_t>(seq.size());
    const std::vector<int32_t> answer = policy->ResponseTokens(p.answer);
    ASSERT_EQ(answer.back(), policy->eos()) << "an answer ends with eos";
    seq.insert(seq.end(), answer.begin(), answer.end());
    answers += static_cast<int64_t>(answer.size());
    for (int64_t t = 0; t < t_len; ++t) {
      const int32_t target = b.targets[r * t_len + t];
      const bool answer_next = t + 1 >= prompt_len && t + 1 < static_cast<int64_t>(seq.size());
      EXPECT_EQ(target, answer_next ? seq[t + 1] : model::kIgnoreIndex)
          << "row " << r << " (" << p.prompt << p.answer << ") position " << t;
      if (t + 1 < static_cast<int64_t>(seq.size())) {
        EXPECT_EQ(b.tokens[r * t_len + t], seq[t]);
      }
    }
  }
  EXPECT_EQ(b.counted, answers);
}

TEST(PostRunTest, SftLearnsResumesBitwiseAndRefusesAnOccupiedFolder) {
  data::testing::TempDir dir;
  const std::string through = dir / "through", halves = dir / "halves";
  auto a = RunSft(SftConfig(), {.run_dir = through}, {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->steps_done, 30);
  ASSERT_TRUE(a->last_eval.has_value());
  const std::vector<nlohmann::json> m = MetricsLines(through);
  ASSERT_GE(m.size(), 30u);
  EXPECT_LT(m[29]["loss"].get<double>(), 0.6 * m[0]["loss"].get<double>());
  // Self-contained: the tokenizer and the run's counters travel with it.
  EXPECT_TRUE(std::filesystem::exists(through + "/step_30/tokenizer.json"));
  const nlohmann::json state =
      nlohmann::json::parse(*ReadFile(through + "/step_30/state.json"));
  EXPECT_EQ(state["kind"], "sft");
  EXPECT_EQ(state["step"], 30);

  int64_t done = 0;
  SftHooks stop_halfway{.run = {.stop_requested = StopAfter(done, 15)},
                        .on_step = [&](const train::StepMetrics&) { ++done; }};
  auto first = RunSft(SftConfig(), {.run_dir = halves}, stop_halfway);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->stopped_early);
  EXPECT_EQ(first->steps_done, 15);
  EXPECT_LT(first->last_eval_step, 15);  // stopped between steps: no held-out pass
  auto config = Config::FromFile(halves + "/config.toml");
  ASSERT_TRUE(config.ok());
  auto second = RunSft(*config, {.run_dir = halves, .resume = true}, {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->first_step, 15);
  EXPECT_EQ(State(halves, 30), State(through, 30));
  {  // A resume runs in the precision it ran, or not at all.
    Config c = *config;
    ASSERT_TRUE(c.Set("sft.precision=bf16").ok());
    const auto refused = RunSft(c, {.run_dir = halves, .resume = true}, {});
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(Refuses(refused.status(), "sft.precision")) << refused.status().ToString();
  }

  EXPECT_FALSE(RunSft(SftConfig(), {.run_dir = through}, {}).ok());  // holds a run
}

TEST(PostRunTest, GrpoIsExactlyOnPolicyAndResumesBitwise) {
  data::testing::TempDir dir;
  const std::string sft = dir / "sft", through = dir / "through", halves = dir / "halves";
  ASSERT_TRUE(RunSft(SftConfig(), {.run_dir = sft}, {}).ok());

  auto a = RunRl(RlConfig(sft), {.run_dir = through}, {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->steps_done, 6);
  ASSERT_TRUE(a->first_eval.has_value());
  std::vector<double> kl;  // to the reference, the starting policy
  for (const nlohmann::json& line : MetricsLines(through)) {
    if (!line.contains("max_logprob_diff")) continue;
    EXPECT_EQ(line["max_logprob_diff"].get<double>(), 0.0) << line.dump();
    EXPECT_EQ(line["rollout_kl"].get<double>(), 0.0) << line.dump();
    EXPECT_GT(line["entropy"].get<double>(), 0.0);
    kl.push_back(line["kl_reference"].get<double>());
  }
  ASSERT_EQ(kl.size(), 6u);
  EXPECT_EQ(kl[0], 0.0);  // the first step's policy is the reference, bit for bit
  EXPECT_GT(*std::max_element(kl.begin(), kl.end()), 0.0);  // then it moves away

  // A KL penalty: the run trains, and its first step's KL is exactly 0 too.
  Config penalized = RlConfig(sft);
  ASSERT_TRUE(penalized.Set("rl.kl_coef=0.5").ok());
  ASSERT_TRUE(RunRl(penalized, {.run_dir = dir / "penalized"}, {}).ok());
  const std::vector<nlohmann::json> p = MetricsLines(dir / "penalized");
  ASSERT_TRUE(p[1].contains("kl_reference"));  // p[0]: the held-out evaluation at the start
  EXPECT_EQ(p[1]["kl_reference"].get<double>(), 0.0);
  Config no_reference = RlConfig(sft);
  ASSERT_TRUE(no_reference.Set("rl.kl_coef=0.5").ok() && no_reference.Set("rl.reference=false").ok());
  EXPECT_FALSE(RunRl(no_reference, {.run_dir = dir / "no_reference"}, {}).ok());

  int64_t done = 0;
  RlHooks stop_halfway{.run = {.stop_requested = StopAfter(done, 3)},
                       .on_step = [&](const RlStepMetrics&) { ++done; }};
  ASSERT_TRUE(RunRl(RlConfig(sft), {.run_dir = halves}, stop_halfway).ok());
  auto config = Config::FromFile(halves + "/config.toml");
  ASSERT_TRUE(config.ok());
  auto second = RunRl(*config, {.run_dir = halves, .resume = true}, {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->first_step, 3);
  EXPECT_EQ(State(halves, 6), State(through, 6));
  // The accuracy at the start travels in the checkpoints to the resumed run's end.
  ASSERT_TRUE(second->first_eval.has_value());
  EXPECT_EQ(second->first_eval->accuracy, a->first_eval->accuracy);

  // A stop request during a step's draw cuts it and drops the step: the run
  // ends at step 3's checkpoint and, resumed, where the run through does.
  // After 3 steps the stop is polled between steps (no), then by step 4's
  // draw (yes); a draw that never polled it would stop after step 4.
  const std::string cut = dir / "cut";
  int64_t cut_done = 0;
  int polls = 0;
  RlHooks stop_in_draw{.run = {.stop_requested = [&] { return cut_done >= 3 && ++polls >= 2; }},
                       .on_step = [&](const RlStepMetrics&) { ++cut_done; }};
  auto stopped = RunRl(RlConfig(sft), {.run_dir = cut}, stop_in_draw);
  ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
  EXPECT_EQ(stopped->steps_done, 3);
  EXPECT_TRUE(stopped->stopped_early);
  auto cut_config = Config::FromFile(cut + "/config.toml");
  ASSERT_TRUE(cut_config.ok());
  ASSERT_TRUE(RunRl(*cut_config, {.run_dir = cut, .resume = true}, {}).ok());
  EXPECT_EQ(State(cut, 6), State(through, 6));
  int64_t step_lines = 0;
  for (const nlohmann::json& line : MetricsLines(cut)) step_lines += line.contains("lr");
  EXPECT_EQ(step_lines, 6);

  // No starting policy, or a run folder of the other kind: refused.
  EXPECT_FALSE(RunRl(RlConfig(""), {.run_dir = dir / "none"}, {}).ok());
  EXPECT_FALSE(RunRl(RlConfig(sft), {.run_dir = sft, .resume = true}, {}).ok());
}

// An RL run asked to stop once `steps` steps are done (the request is
// first polled by what follows the last of them).
Result<PostRunSummary> RunRlStoppedAfter(const Config& c, const std::string& run_dir,
                                         int64_t steps) {
  int64_t done = 0;
  RlHooks stop{.run = {.stop_requested = StopAfter(done, steps)},
               .on_step = [&](const RlStepMetrics&) { ++done; }};
  return RunRl(c, {.run_dir = run_dir}, stop);
}

// A resumed RL run (from RUN/config.toml) asked to stop at its second poll
// after its first evaluation: the next step's draw, after Done's.
Result<PostRunSummary> ResumeRlStoppedAfterAnEvaluation(const std::string& run_dir) {
  bool evaluated = false;
  int polls = 0;
  RlHooks stop{.run = {.on_eval = [&](int64_t, const TaskEval&) { evaluated = true; },
                       .stop_requested = [&] { return evaluated && ++polls >= 2; }}};
  return RunRl(*Config::FromFile(run_dir + "/config.toml"), {.run_dir = run_dir, .resume = true},
               stop);
}

// A stop request during a held-out evaluation cuts it on its next decode
// step: the run ends at that step's checkpoint without it, and the resumed
// run evaluates there first, so it ends where an uninterrupted run does
// with the same metrics. Also for the evaluation at the start, the last
// one, a second stop right after the make-up, and for SFT.
TEST(PostRunTest, AStopCutsAnEvaluationAndTheResumeMakesItUp) {
  data::testing::TempDir dir;
  const std::string sft = dir / "sft";
  Config sft_config = SftConfig();
  ASSERT_TRUE(sft_config.Set("sft.eval_every=5").ok() &&
              sft_config.Set("sft.eval_problems=8").ok());
  ASSERT_TRUE(RunSft(sft_config, {.run_dir = sft}, {}).ok());
  int64_t sft_done = 0;
  SftHooks sft_stop{.run = {.stop_requested = StopAfter(sft_done, 10)},
                    .on_step = [&](const train::StepMetrics&) { ++sft_done; }};
  const std::string sft_cut = dir / "sft_cut";
  std::vector<std::string> messages;
  sft_stop.run.on_message = [&](const std::string& m) { messages.push_back(m); };
  auto sft_stopped = RunSft(sft_config, {.run_dir = sft_cut}, sft_stop);
  ASSERT_TRUE(sft_stopped.ok()) << sft_stopped.status().ToString();
  EXPECT_EQ(sft_stopped->steps_done, 10);  // (the first poll after step 9 is step 10's evaluation)
  EXPECT_EQ(sft_stopped->last_eval_step, 5);
  EXPECT_NE(std::find(messages.begin(), messages.end(),
                      "stop requested during the held-out evaluation at step 10: it is dropped "
                      "(a resumed run evaluates again)"),
            messages.end());
  EXPECT_EQ(*ReadFile(sft_cut + "/latest"), "step_10\n");
  ASSERT_TRUE(
      RunSft(*Config::FromFile(sft_cut + "/config.toml"), {.run_dir = sft_cut, .resume = true}, {})
          .ok());
  EXPECT_EQ(State(sft_cut, 30), State(sft, 30));
  EXPECT_EQ(UntimedMetrics(sft_cut), UntimedMetrics(sft));
  // sft.stop_at_accuracy met at an evaluation (a faster learning rate, so
  // that one does): the uninterrupted run ends there; cut in that evaluation,
  // the resume makes it up, finds the run done, and its checkpoint says so
  // as the uninterrupted one's does.
  {
    Config c = sft_config;
    ASSERT_TRUE(c.Set("sft.steps=150").ok() && c.Set("optim.lr=1e-2").ok() &&
                c.Set("sft.stop_at_accuracy=0.1").ok() && c.Set("sft.eval_problems=16").ok());
    const std::string met = dir / "sft_met", met_cut = dir / "sft_met_cut";
    auto reached = RunSft(c, {.run_dir = met}, {});
    ASSERT_TRUE(reached.ok()) << reached.status().ToString();
    const int64_t at = reached->steps_done;
    ASSERT_LT(at, 150) << "no evaluation reached the accuracy: the case tests nothing";
    sft_done = 0;
    SftHooks stop{.run = {.stop_requested = StopAfter(sft_done, at)},
                  .on_step = [&](const train::StepMetrics&) { ++sft_done; }};
    auto cut = RunSft(c, {.run_dir = met_cut}, stop);
    ASSERT_TRUE(cut.ok()) << cut.status().ToString();
    ASSERT_EQ(cut->steps_done, at);
    ASSERT_LT(cut->last_eval_step, at);  // the evaluation at `at` was cut
    ASSERT_TRUE(RunSft(*Config::FromFile(met_cut + "/config.toml"),
                       {.run_dir = met_cut, .resume = true}, {})
                    .ok());
    const std::string state_file = "/step_" + std::to_string(at) + "/state.json";
    const std::string state = *ReadFile(met + state_file);
    EXPECT_NE(state.find("\"stopped_at_accuracy\": true"), std::string::npos) << state;
    EXPECT_EQ(*ReadFile(met_cut + state_file), state);
    EXPECT_EQ(UntimedMetrics(met_cut), UntimedMetrics(met));
  }

  Config rl_config = RlConfig(sft);
  ASSERT_TRUE(rl_config.Set("rl.eval_every=2").ok());
  const std::string through = dir / "through", at_start = dir / "at_start";
  ASSERT_TRUE(RunRl(rl_config, {.run_dir = through}, {}).ok());
  for (const int staleness : {0, 1}) {
    SCOPED_TRACE(staleness);
    Config c = rl_config;
    ASSERT_TRUE(c.Set("rl.max_staleness=" + std::to_string(staleness)).ok());
    const std::string ref = staleness == 0 ? through : dir / "through_async",
                      cut = dir / ("cut" + std::to_string(staleness));
    if (staleness == 1) {
      ASSERT_TRUE(RunRl(c, {.run_dir = ref}, {}).ok());
    }
    // After 2 steps the first poll is step 2's evaluation.
    auto stopped = RunRlStoppedAfter(c, cut, 2);
    ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
    EXPECT_EQ(stopped->steps_done, 2);
    EXPECT_TRUE(stopped->stopped_early);
    EXPECT_EQ(stopped->last_eval_step, 0);
    ASSERT_TRUE(
        RunRl(*Config::FromFile(cut + "/config.toml"), {.run_dir = cut, .resume = true}, {}).ok());
    EXPECT_EQ(State(cut, 6), State(ref, 6));
    EXPECT_EQ(UntimedMetrics(cut), UntimedMetrics(ref));
  }
  // Cut again right after the make-up (in step 3's draw): the resume starts
  // from step 2's checkpoint, written again with its evaluation, and does
  // not make it up twice.
  {
    const std::string twice = dir / "twice";
    ASSERT_TRUE(RunRlStoppedAfter(rl_config, twice, 2).ok());
    auto second = ResumeRlStoppedAfterAnEvaluation(twice);
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->steps_done, 2);
    ASSERT_TRUE(
        RunRl(*Config::FromFile(twice + "/config.toml"), {.run_dir = twice, .resume = true}, {})
            .ok());
    EXPECT_EQ(State(twice, 6), State(through, 6));
    EXPECT_EQ(UntimedMetrics(twice), UntimedMetrics(through));
  }
  // The last evaluation cut: the resume of the finished run makes it up
  // once, and a second resume changes nothing.
  {
    const std::string last = dir / "last";
    auto stopped = RunRlStoppedAfter(rl_config, last, 6);
    ASSERT_TRUE(stopped.ok()) << stopped.status().ToString();
    EXPECT_EQ(stopped->steps_done, 6);
    EXPECT_EQ(stopped->last_eval_step, 4);
    const Config resumed = *Config::FromFile(last + "/config.toml");
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(RunRl(resumed, {.run_dir = last, .resume = true}, {}).ok());
      EXPECT_EQ(UntimedMetrics(last), UntimedMetrics(through)) << "resume " << i;
    }
    EXPECT_EQ(*ReadFile(last + "/step_6/state.json"), *ReadFile(through + "/step_6/state.json"));
  }
  // Cut at the start: no step, and the resume measures the start again.
  RlHooks stop_at_once{.run = {.stop_requested = [] { return true; }}};
  auto none = RunRl(rl_config, {.run_dir = at_start}, stop_at_once);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->steps_done, 0);
  EXPECT_FALSE(none->first_eval.has_value());
  EXPECT_TRUE(MetricsLines(at_start).empty());
  // Resumed, measured, then stopped in step 1's draw: the next resume does
  // not measure the start a second time.
  auto first = ResumeRlStoppedAfterAnEvaluation(at_start);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->steps_done, 0);
  ASSERT_TRUE(
      RunRl(*Config::FromFile(at_start + "/config.toml"), {.run_dir = at_start, .resume = true}, {})
          .ok());
  EXPECT_EQ(State(at_start, 6), State(through, 6));
  EXPECT_EQ(UntimedMetrics(at_start), UntimedMetrics(through));
}

TEST(PostRunTest, PpoTrainsItsValueHeadAndResumesBitwise) {
  data::testing::TempDir dir;
  const std::string sft = dir / "sft";
  ASSERT_TRUE(RunSft(SftConfig(), {.run_dir = sft}, {}).ok());
  // The value head on the policy's features, or a critic model of its own.
  for (const char* kind : {"shared", "separate"}) {
    const std::string critic_kind = kind;
    const std::string through = dir / ("through-" + critic_kind);
    const std::string halves = dir / ("halves-" + critic_kind);
    auto ppo = [&] {
      Config c = RlConfig(sft);
      const std::string sets[] = {"rl.algorithm=\"ppo\"", "rl.epochs=2", "rl.minibatches=2",
                                  "rl.critic=\"" + critic_kind + "\""};
      for (const std::string& set : sets) {
        EXPECT_TRUE(c.Set(set).ok()) << set;
      }
      return c;
    };
    auto a = RunRl(ppo(), {.run_dir = through}, {});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    int steps = 0;
    for (const nlohmann::json& line : MetricsLines(through)) {
      if (!line.contains("max_logprob_diff")) continue;
      ++steps;
      EXPECT_EQ(line["max_logprob_diff"].get<double>(), 0.0) << line.dump();
      EXPECT_EQ(line["updates"].get<int>(), 4) << line.dump();
      EXPECT_TRUE(line.contains("value_loss") && line.contains("explained_variance"));
    }
    EXPECT_EQ(steps, 6);

    int64_t done = 0;
    RlHooks stop_halfway{.run = {.stop_requested = StopAfter(done, 3)},
                         .on_step = [&](const RlStepMetrics&) { ++done; }};
    ASSERT_TRUE(RunRl(ppo(), {.run_dir = halves}, stop_halfway).ok());
    auto config = Config::FromFile(halves + "/config.toml");
    ASSERT_TRUE(config.ok());
    auto second = RunRl(*config, {.run_dir = halves, .resume = true}, {});
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->first_step, 3);
    // The critic's state in the final checkpoint: the value head, and a
    // separate critic's model, with their optimizers.
    auto critic = [&](const std::string& run) {
      std::vector<std::string> files = {"value_head.safetensors",
                                        "value_head_optimizer.safetensors"};
      if (critic_kind == "separate") {
        files.push_back("critic.safetensors");
        files.push_back("critic_optimizer.safetensors");
      }
      std::string all;
      for (const std::string& f : files) {
        auto text = ReadFile(run + "/step_6/" + f);
        EXPECT_TRUE(text.ok()) << run << " " << f;
        if (text.ok()) all += *text;
      }
      return all;
    };
    // (EXPECT_TRUE: a difference would print megabytes of bytes.)
    EXPECT_TRUE(State(halves, 6) == State(through, 6)) << critic_kind;
    EXPECT_TRUE(critic(halves) == critic(through)) << critic_kind;
    if (critic_kind == "separate") {
      // Resuming it with the other critic: refused.
      Config shared = *config;
      ASSERT_TRUE(shared.Set("rl.critic=\"shared\"").ok());
      const auto refused = RunRl(shared, {.run_dir = halves, .resume = true}, {});
      ASSERT_FALSE(refused.ok());
      EXPECT_NE(refused.status().message().find("rl.critic"), std::string::npos)
          << refused.status().ToString();
    }
  }
  // A separate critic is PPO's only.
  Config grpo_critic = RlConfig(sft);
  ASSERT_TRUE(grpo_critic.Set("rl.critic=\"separate\"").ok());
  EXPECT_FALSE(RunRl(grpo_critic, {.run_dir = dir / "grpo_critic"}, {}).ok());

  // A GRPO run's folder resumed as PPO (it has no value head): refused.
  const std::string grpo = dir / "grpo";
  ASSERT_TRUE(RunRl(RlConfig(sft), {.run_dir = grpo}, {}).ok());
  Config as_ppo = RlConfig(sft);
  ASSERT_TRUE(as_ppo.Set("rl.algorithm=\"ppo\"").ok());
  const auto refused = RunRl(as_ppo, {.run_dir = grpo, .resume = true}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rl.algorithm"), std::string::npos)
      << refused.status().ToString();
}

TEST(PostRunTest, AsyncRolloutsAreOneStepStaleAndResumeBitwise) {
  data::testing::TempDir dir;
  Config longer_sft = SftConfig();  // well-formed answers: rewards that differ in a group
  ASSERT_TRUE(longer_sft.Set("sft.steps=100").ok());
  ASSERT_TRUE(RunSft(longer_sft, {.run_dir = dir / "sft100"}, {}).ok());
  // The snapshot runs the policy's precision and recipe (fp8-delayed: with
  // the scales of the weights it copies, kept in the checkpoints too).
  for (const char* precision : {"f32", "fp8-block", "fp8-delayed"}) {
    SCOPED_TRACE(precision);
    const std::string through = dir / (std::string("through-") + precision);
    const std::string halves = dir / (std::string("halves-") + precision);
    auto async = [&] {
      Config c = RlConfig(dir / "sft100");
      EXPECT_TRUE(c.Set("rl.max_staleness=1").ok());
      EXPECT_TRUE(c.Set("rl.threads=1").ok());
      EXPECT_TRUE(c.Set(std::string("rl.precision=") + precision).ok());
      return c;
    };
    auto a = RunRl(async(), {.run_dir = through}, {});
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    std::vector<nlohmann::json> steps;
    for (const nlohmann::json& line : MetricsLines(through)) {
      if (line.contains("staleness")) steps.push_back(line);
    }
    ASSERT_EQ(steps.size(), 6u);
    // Step 1 trains on samples of its own weights; the others on the weights
    // one update before theirs, and the importance weights say so.
    EXPECT_EQ(steps[0]["staleness"].get<int>(), 0);
    EXPECT_EQ(steps[0]["max_logprob_diff"].get<double>(), 0.0);
    EXPECT_EQ(steps[0]["tis_mean"].get<double>(), 1.0);
    for (size_t i = 1; i < steps.size(); ++i) {
      EXPECT_EQ(steps[i]["staleness"].get<int>(), 1);
      EXPECT_GT(steps[i]["max_logprob_diff"].get<double>(), 0.0) << i;
      EXPECT_NE(steps[i]["tis_mean"].get<double>(), 1.0) << i;
    }
    EXPECT_TRUE(std::filesystem::exists(through + "/step_3/rollout_snapshot.safetensors"));

    int64_t done = 0;
    RlHooks stop_halfway{.run = {.stop_requested = StopAfter(done, 3)},
                         .on_step = [&](const RlStepMetrics&) { ++done; }};
    ASSERT_TRUE(RunRl(async(), {.run_dir = halves}, stop_halfway).ok());
    auto config = Config::FromFile(halves + "/config.toml");
    ASSERT_TRUE(config.ok());
    auto second = RunRl(*config, {.run_dir = halves, .resume = true}, {});
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    EXPECT_EQ(second->first_step, 3);
    EXPECT_TRUE(State(halves, 6) == State(through, 6));
    const auto snapshot_a = ReadFile(halves + "/step_6/rollout_snapshot.safetensors");
    const auto snapshot_b = ReadFile(through + "/step_6/rollout_snapshot.safetensors");
    ASSERT_TRUE(snapshot_a.ok() && snapshot_b.ok());
    EXPECT_TRUE(*snapshot_a == *snapshot_b);
  }

  // A colocated run's folder resumed asynchronously (no snapshot): refused.
  const std::string colocated = dir / "colocated";
  ASSERT_TRUE(RunRl(RlConfig(dir / "sft100"), {.run_dir = colocated}, {}).ok());
  Config async = RlConfig(dir / "sft100");
  ASSERT_TRUE(async.Set("rl.max_staleness=1").ok());
  const auto refused = RunRl(async, {.run_dir = colocated, .resume = true}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("rl.max_staleness"), std::string::npos)
      << refused.status().ToString();
}

// The fp8-delayed value of RUN/step_<step>/state.json (the amax histories).
nlohmann::json DelayedState(const std::string& run_dir, int64_t step) {
  auto text = ReadFile(run_dir + "/step_" + std::to_string(step) + "/state.json");
  EXPECT_TRUE(text.ok());
  const nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_TRUE(j.contains("fp8_delayed")) << run_dir;
  return j.value("fp8_delayed", nlohmann::json());
}

// fp8-delayed post-training: SFT records its amax histories and resumes
// bitwise with them; RL from a checkpoint without histories (f32) starts
// them from a forward of its first prompts, the policy's and the
// reference's alike, and is then exactly on-policy (fixed scales a step),
// its first KL to the reference 0, and a resume ends where one run does;
// PPO's separate critic keeps histories of its own.
TEST(PostRunTest, Fp8DelayedRunsAreExactlyOnPolicyAndResumeBitwise) {
  data::testing::TempDir dir;
  const auto delayed_sft = [] {
    Config c = SftConfig();
    EXPECT_TRUE(c.Set("sft.precision=fp8-delayed").ok());
    return c;
  };
  const std::string sft_through = dir / "sft_through", sft_halves = dir / "sft_halves";
  ASSERT_TRUE(RunSft(delayed_sft(), {.run_dir = sft_through}, {}).ok());
  int64_t done = 0;
  SftHooks sft_halfway{.run = {.stop_requested = StopAfter(done, 15)},
                       .on_step = [&](const train::StepMetrics&) { ++done; }};
  ASSERT_TRUE(RunSft(delayed_sft(), {.run_dir = sft_halves}, sft_halfway).ok());
  auto sft_config = Config::FromFile(sft_halves + "/config.toml");
  ASSERT_TRUE(sft_config.ok());
  ASSERT_TRUE(RunSft(*sft_config, {.run_dir = sft_halves, .resume = true}, {}).ok());
  EXPECT_EQ(State(sft_halves, 30), State(sft_through, 30));
  EXPECT_EQ(DelayedState(sft_halves, 30), DelayedState(sft_through, 30));
  // A resume keeps the histories' length and reduction.
  for (const char* change : {"train.fp8_amax_history=8", "train.fp8_amax_reduction=most_recent"}) {
    Config c = *sft_config;
    ASSERT_TRUE(c.Set(change).ok());
    const auto refused = RunSft(c, {.run_dir = sft_halves, .resume = true}, {});
    ASSERT_FALSE(refused.ok()) << change;
    // (another length does not even fit the saved histories)
    const std::string key(change, std::strchr(change, '='));
    EXPECT_NE(refused.status().message().find(key), std::string::npos)
        << refused.status().ToString();
  }
  // Out of time before its first step, a run still evaluates (on the
  // histories its first prompts started) and saves.
  Config out_of_time = delayed_sft();
  ASSERT_TRUE(out_of_time.Set("sft.max_minutes=1e-9").ok());
  const auto early = RunSft(out_of_time, {.run_dir = dir / "sft_early"}, {});
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_EQ(early->steps_done, 0);
  EXPECT_TRUE(early->stopped_early);
  EXPECT_EQ(early->last_eval_step, 0);

  const std::string f32_sft = dir / "f32_sft", through = dir / "through", halves = dir / "halves";
  Config f32_sft_config = SftConfig();  // long enough for answers of some shape
  ASSERT_TRUE(f32_sft_config.Set("sft.steps=100").ok());
  ASSERT_TRUE(RunSft(f32_sft_config, {.run_dir = f32_sft}, {}).ok());
  const auto delayed_rl = [&] {
    Config c = RlConfig(f32_sft);
    // A format reward: groups whose rewards differ from the first step on.
    EXPECT_TRUE(c.Set("rl.precision=fp8-delayed").ok() && c.Set("rl.kl_coef=0.5").ok() &&
                c.Set("rl.format_weight=0.5").ok());
    return c;
  };
  std::vector<std::string> messages;
  RlHooks listen{.run = {.on_message = [&](const std::string& m) { messages.push_back(m); }}};
  ASSERT_TRUE(RunRl(delayed_rl(), {.run_dir = through}, listen).ok());
  EXPECT_NE(std::find_if(messages.begin(), messages.end(),
                         [](const std::string& m) {
                           return m.find("amax histories start from") != std::string::npos;
                         }),
            messages.end());
  std::vector<double> kl;
  std::vector<int64_t> trained;
  for (const nlohmann::json& line : MetricsLines(through)) {
    if (!line.contains("max_logprob_diff")) continue;
    EXPECT_EQ(line["max_logprob_diff"].get<double>(), 0.0) << line.dump();
    EXPECT_EQ(line["rollout_kl"].get<double>(), 0.0) << line.dump();
    trained.push_back(line["trained_tokens"].get<int64_t>());
    kl.push_back(line["kl_reference"].get<double>());
  }
  ASSERT_EQ(kl.size(), 6u);
  // Every step trains (the scales move after each), the first on the
  // reference's weights and scales: its KL is 0 over trained tokens.
  EXPECT_GT(*std::min_element(trained.begin(), trained.end()), 0);
  EXPECT_EQ(kl[0], 0.0);  // the reference's scales are the starting policy's
  EXPECT_GT(*std::max_element(kl.begin(), kl.end()), 0.0);
  done = 0;
  RlHooks rl_halfway{.run = {.stop_requested = StopAfter(done, 3)},
                     .on_step = [&](const RlStepMetrics&) { ++done; }};
  ASSERT_TRUE(RunRl(delayed_rl(), {.run_dir = halves}, rl_halfway).ok());
  auto config = Config::FromFile(halves + "/config.toml");
  ASSERT_TRUE(config.ok());
  auto second = RunRl(*config, {.run_dir = halves, .resume = true}, {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->first_step, 3);
  EXPECT_EQ(State(halves, 6), State(through, 6));
  EXPECT_EQ(DelayedState(halves, 6), DelayedState(through, 6));

  // PPO with a separate critic: the critic keeps amax histories of its own
  // (started as the policy's, in its checkpoint file), resumed bitwise too.
  const auto critic_rl = [&] {
    Config c = delayed_rl();
    EXPECT_TRUE(c.Set("rl.algorithm=ppo").ok() && c.Set("rl.critic=separate").ok());
    return c;
  };
  const std::string critic_through = dir / "critic_through", critic_halves = dir / "critic_halves";
  auto c = RunRl(critic_rl(), {.run_dir = critic_through}, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const nlohmann::json& line : MetricsLines(critic_through)) {
    if (line.contains("max_logprob_diff")) {
      EXPECT_EQ(line["max_logprob_diff"].get<double>(), 0.0);
    }
  }
  done = 0;
  RlHooks critic_halfway{.run = {.stop_requested = StopAfter(done, 3)},
                         .on_step = [&](const RlStepMetrics&) { ++done; }};
  ASSERT_TRUE(RunRl(critic_rl(), {.run_dir = critic_halves}, critic_halfway).ok());
  auto critic_config = Config::FromFile(critic_halves + "/config.toml");
  ASSERT_TRUE(critic_config.ok());
  ASSERT_TRUE(RunRl(*critic_config, {.run_dir = critic_halves, .resume = true}, {}).ok());
  EXPECT_EQ(State(critic_halves, 6), State(critic_through, 6));
  const auto critic_a = ReadFile(critic_halves + "/step_6/critic.safetensors");
  const auto critic_b = ReadFile(critic_through + "/step_6/critic.safetensors");
  ASSERT_TRUE(critic_a.ok() && critic_b.ok());
  EXPECT_TRUE(*critic_a == *critic_b);
  EXPECT_NE(critic_a->find("fp8_delayed"), std::string::npos);  // its scales, in the metadata

  // fp8-tensor's scales come from the batch: refused.
  Config tensor = RlConfig(f32_sft);
  ASSERT_TRUE(tensor.Set("rl.precision=fp8-tensor").ok());
  const auto refused = RunRl(tensor, {.run_dir = dir / "tensor"}, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp8-block, mxfp8 or fp8-delayed"), std::string::npos)
      << refused.status().ToString();
}

// An FP8 recipe set in a post-training run's config (pre-training's
// train.fp8_* keys) is the one it runs and records: an SFT run resumed
// halfway ends where one run through does, its checkpoints name the recipe,
// and an RL run from one inherits it unless its own config sets another.
TEST(PostRunTest, Fp8RecipeTravelsWithTheRunAndItsCheckpoints) {
  data::testing::TempDir dir;
  const std::string through = dir / "through", halves = dir / "halves";
  const auto fp8_sft = [] {
    Config c = SftConfig();
    for (const char* s : {"sft.precision=fp8-block", "model.n_layers=3", "train.fp8_decode=bf16",
                          "train.fp8_high_precision=bf16", "train.fp8_high_precision_layers=1",
                          "train.fp8_grad_format=e5m2"}) {
      EXPECT_TRUE(c.Set(s).ok()) << s;
    }
    return c;
  };
  auto a = RunSft(fp8_sft(), {.run_dir = through}, {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  int64_t done = 0;
  SftHooks stop_halfway{.run = {.stop_requested = StopAfter(done, 15)},
                        .on_step = [&](const train::StepMetrics&) { ++done; }};
  ASSERT_TRUE(RunSft(fp8_sft(), {.run_dir = halves}, stop_halfway).ok());
  auto config = Config::FromFile(halves + "/config.toml");
  ASSERT_TRUE(config.ok());
  auto second = RunSft(*config, {.run_dir = halves, .resume = true}, {});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(State(halves, 30), State(through, 30));
  // A resume runs the recipe it ran, or not at all; "auto" keeps what ran.
  for (const char* change :
       {"train.fp8_decode=f32", "train.fp8_high_precision=f32", "train.fp8_high_precision_layers=0",
        "train.fp8_grad_format=e4m3", "sft.precision=mxfp8"}) {
    Config c = *config;
    ASSERT_TRUE(c.Set(change).ok());
    const auto refused = RunSft(c, {.run_dir = halves, .resume = true}, {});
    ASSERT_FALSE(refused.ok()) << change;
    const std::string key(change, std::strchr(change, '='));
    EXPECT_TRUE(Refuses(refused.status(), key)) << refused.status().ToString();
  }

  const auto recipe_of = [](const std::string& config_toml) {
    auto c = Config::FromFile(config_toml);
    EXPECT_TRUE(c.ok()) << config_toml;
    return *c->GetString("train.fp8_decode", "?") + " " +
           *c->GetString("train.fp8_high_precision", "?") + " " +
           std::to_string(*c->GetInt("train.fp8_high_precision_layers", -1)) + " " +
           *c->GetString("train.fp8_grad_format", "?");
  };
  EXPECT_EQ(recipe_of(through + "/step_30/config.toml"), "bf16 bf16 1 e5m2");

  const auto fp8_rl = [&](const std::string& out, const char* extra) {
    Config c = RlConfig(through);
    EXPECT_TRUE(c.Set("rl.precision=fp8-block").ok() && c.Set("rl.steps=2").ok());
    if (extra != nullptr) {
      EXPECT_TRUE(c.Set(extra).ok());
    }
    return RunRl(c, {.run_dir = out}, {});
  };
  auto inherited = fp8_rl(dir / "rl", nullptr);
  ASSERT_TRUE(inherited.ok()) << inherited.status().ToString();
  EXPECT_EQ(recipe_of(dir / "rl/step_2/config.toml"), "bf16 bf16 1 e5m2");
  for (const nlohmann::json& line : MetricsLines(dir / "rl")) {
    if (line.contains("max_logprob_diff")) {
      EXPECT_EQ(line["max_logprob_diff"].get<double>(), 0.0);
    }
  }
  ASSERT_TRUE(fp8_rl(dir / "rl_auto", "train.fp8_decode=auto").ok());  // as the checkpoint
  EXPECT_EQ(recipe_of(dir / "rl_auto/step_2/config.toml"), "bf16 bf16 1 e5m2");
  for (const char* change : {"train.fp8_decode=auto", "train.fp8_decode=f32"}) {
    auto c = Config::FromFile(dir / "rl_auto/config.toml");
    ASSERT_TRUE(c.ok() && c->Set(change).ok());
    const auto resumed = RunRl(*c, {.run_dir = dir / "rl_auto", .resume = true}, {});
    if (std::string(change).ends_with("auto")) {
      EXPECT_TRUE(resumed.ok()) << resumed.status().ToString();
    } else {
      ASSERT_FALSE(resumed.ok());
      EXPECT_TRUE(Refuses(resumed.status(), "train.fp8_decode")) << resumed.status().ToString();
    }
  }
  ASSERT_TRUE(fp8_rl(dir / "rl_auto_grad", "train.fp8_grad_format=auto").ok());
  EXPECT_EQ(recipe_of(dir / "rl_auto_grad/step_2/config.toml"), "bf16 bf16 1 e5m2");
  ASSERT_TRUE(fp8_rl(dir / "rl_f32_decode", "train.fp8_decode=f32").ok());
  EXPECT_EQ(recipe_of(dir / "rl_f32_decode/step_2/config.toml"), "f32 bf16 1 e5m2");
  EXPECT_FALSE(fp8_rl(dir / "rl_bad", "train.fp8_decode=bf17").ok());

  // mxfp8's scale rule is recorded with the recipe, and a resume that asks
  // for the other rule is refused.
  Config mx = SftConfig();
  for (const char* s : {"sft.precision=mxfp8", "train.fp8_mx_scale=round_up", "sft.steps=4"}) {
    ASSERT_TRUE(mx.Set(s).ok()) << s;
  }
  done = 0;
  SftHooks mx_halfway{.run = {.stop_requested = StopAfter(done, 2)},
                      .on_step = [&](const train::StepMetrics&) { ++done; }};
  ASSERT_TRUE(RunSft(mx, {.run_dir = dir / "mx"}, mx_halfway).ok());
  auto mx_config = Config::FromFile(dir / "mx/config.toml");
  ASSERT_TRUE(mx_config.ok());
  EXPECT_EQ(*mx_config->GetString("train.fp8_mx_scale", "?"), "round_up");
  ASSERT_TRUE(mx_config->Set("train.fp8_mx_scale=ocp").ok());
  const auto mx_refused = RunSft(*mx_config, {.run_dir = dir / "mx", .resume = true}, {});
  ASSERT_FALSE(mx_refused.ok());
  EXPECT_TRUE(Refuses(mx_refused.status(), "train.fp8_mx_scale")) << mx_refused.status().ToString();
}

}  // namespace
}  // namespace anvil::rl
