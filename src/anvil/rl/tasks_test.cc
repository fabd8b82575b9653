// RL tasks and rewards: problems are pure functions of (settings, seed,
// split, index), correct, and the splits disjoint; the task reward scores
// exact and well-formed answers; a user's pairs come from their file; the command reward returns
// the command's number, and 0 with a reason when it fails, times out (also after closing its
// output, or with children of its own: the whole group is killed in time) or prints junk.
#include "anvil/rl/tasks.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "anvil/rl/reward.h"

namespace anvil::rl {
namespace {

TEST(TasksTest, ProblemsAreSeededCorrectAndTheSplitsDisjoint) {
  for (const Task task : {Task::kAddition, Task::kSorting, Task::kWordProblem}) {
    const TaskConfig c{.task = task, .digits = 2, .list_len = 4, .seed = 9};
    ASSERT_TRUE(c.Validate().ok());
    std::set<std::string> train, held_out;
    for (uint64_t i = 0; i < 400; ++i) {
      const Problem p = MakeProblem(c, Split::kTrain, i);
      EXPECT_EQ(p.prompt, MakeProblem(c, Split::kTrain, i).prompt);  // a pure function
      train.insert(p.prompt);
      held_out.insert(MakeProblem(c, Split::kHeldOut, i).prompt);
      // Every answer is right and scores 1 + the format reward.
      const RewardResult r = TaskReward(task, p, " " + p.answer + "\nmore");
      EXPECT_TRUE(r.correct && r.well_formed) << p.prompt << " -> " << p.answer;
      EXPECT_DOUBLE_EQ(r.reward, 1.1);
      if (task == Task::kAddition) {
        int a = 0, b = 0;
        ASSERT_EQ(std::sscanf(p.prompt.c_str(), "%d+%d=", &a, &b), 2);
        EXPECT_EQ(p.answer, std::to_string(a + b));
      }
    }
    for (const std::string& p : held_out) EXPECT_EQ(train.count(p), 0u) << TaskName(task) << p;
    EXPECT_GT(train.size(), 40u);
    const TaskConfig other{.task = task, .digits = 2, .list_len = 4, .seed = 10};
    auto first_two = [](const TaskConfig& t) {
      return MakeProblem(t, Split::kTrain, 0).prompt + MakeProblem(t, Split::kTrain, 1).prompt;
    };
    EXPECT_NE(first_two(other), first_two(c)) << "another seed, other problems";
  }
  EXPECT_FALSE(ParseTask("chess").ok());
  EXPECT_FALSE(TaskConfig{.digits = 0}.Validate().ok());
}

TEST(TasksTest, TaskRewardScoresExactAndWellFormedAnswers) {
  const Problem p{"12+30=", "42"};
  EXPECT_DOUBLE_EQ(TaskReward(Task::kAddition, p, "42").reward, 1.1);
  EXPECT_DOUBLE_EQ(TaskReward(Task::kAddition, p, "41").reward, 0.1);   // wrong, well formed
  EXPECT_DOUBLE_EQ(TaskReward(Task::kAddition, p, "4 2").reward, 0.0);  // neither
  EXPECT_DOUBLE_EQ(TaskReward(Task::kAddition, p, "forty").reward, 0.0);
  const Problem s{"sort 3 1 2:", "1 2 3"};
  EXPECT_DOUBLE_EQ(TaskReward(Task::kSorting, s, "1 2 3").reward, 1.1);
  EXPECT_DOUBLE_EQ(TaskReward(Task::kSorting, s, "3 2 1", 0.5).reward, 0.5);
  EXPECT_DOUBLE_EQ(TaskReward(Task::kSorting, s, "1,2,3").reward, 0.0);
}

// A user's pairs: the last task.held_out held out, problem i of a split
// its pair i modulo the split's size; the answer compared without the
// spaces around it; the run records the file's absolute path and a hash of
// its pairs, and a changed file is refused; bad lines are named.
TEST(TasksTest, PairsComeFromAFileInItsOrder) {
  const std::string path = ::testing::TempDir() + "pairs_" + std::to_string(getpid()) + ".jsonl";
  std::ofstream(path) << R"({"prompt": "Q: one", "response": " 1"})"
                      << "\n\n"
                      << R"({"prompt": "Q: two", "response": "2", "note": "ignored"})"
                      << "\n"
                      << R"({"prompt": "Q: three", "response": "3"})"
                      << "\n"
                      << R"({"prompt": "Q: four", "response": "4"})"
                      << "\n";
  Config config;
  ASSERT_TRUE(config.Set("task.name=\"pairs\"").ok());
  ASSERT_TRUE(config.Set("task.data=\"" + path + "\"").ok());
  ASSERT_TRUE(config.Set("task.held_out=1").ok());
  const Result<TaskConfig> task = TaskConfig::FromConfig(config);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_EQ(task->SplitSize(Split::kTrain), 3);
  EXPECT_EQ(task->SplitSize(Split::kHeldOut), 1);
  EXPECT_EQ(MakeProblem(*task, Split::kTrain, 0).prompt, "Q: one");
  EXPECT_EQ(MakeProblem(*task, Split::kTrain, 4).prompt, "Q: two");  // (4 mod 3)
  EXPECT_EQ(MakeProblem(*task, Split::kHeldOut, 7).prompt, "Q: four");
  const Problem first = MakeProblem(*task, Split::kTrain, 0);
  EXPECT_DOUBLE_EQ(TaskReward(Task::kPairs, first, "1\nmore").reward, 1.1);
  EXPECT_DOUBLE_EQ(TaskReward(Task::kPairs, first, "one").reward, 0.1);  // wrong, an answer
  EXPECT_DOUBLE_EQ(TaskReward(Task::kPairs, first, " ").reward, 0.0);
  // What the run's config.toml keeps: a resume from it reads the same
  // pairs, and is refused once the file holds others.
  const std::string toml = config.ResolvedToml();
  EXPECT_NE(toml.find("data_hash = '"), std::string::npos) << toml;
  EXPECT_NE(toml.find("data = '/"), std::string::npos) << "not its absolute path: " << toml;
  const Result<Config> saved = Config::FromString(toml, "config.toml");
  ASSERT_TRUE(saved.ok()) << saved.status().ToString();
  Config resumed = *saved;
  EXPECT_TRUE(TaskConfig::FromConfig(resumed).ok());
  std::ofstream(path, std::ios::app) << R"({"prompt": "Q: five", "response": "5"})"
                                     << "\n";
  resumed = *saved;
  const Result<TaskConfig> changed = TaskConfig::FromConfig(resumed);
  ASSERT_FALSE(changed.ok());
  EXPECT_NE(changed.status().message().find("holds other pairs than the run recorded"),
            std::string::npos)
      << changed.status().message();
  // Too many held out; a blank answer, or a line that is not a pair (named).
  auto refused = [&](const std::string& text) {
    const Result<TaskConfig> r = TaskConfig::FromConfig(config);
    EXPECT_FALSE(r.ok()) << text;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(text), std::string::npos) << r.status().message();
    }
  };
  ASSERT_TRUE(config.Set("task.held_out=5").ok());
  refused("task.held_out = 5 must leave at least one to train on");
  ASSERT_TRUE(config.Set("task.held_out=1").ok());
  std::ofstream(path, std::ios::app) << R"({"prompt": "Q: six", "response": " \nsix"})"
                                     << "\n";
  refused(path + " line 7: expected");
  std::ofstream(path, std::ios::trunc) << R"({"prompt": "Q: seven"})"
                                       << "\n";
  refused(path + " line 1: expected");
  std::remove(path.c_str());
  refused("cannot open it");
  // task.data belongs to pairs alone.
  Config addition;
  ASSERT_TRUE(addition.Set("task.data=\"x.jsonl\"").ok());
  const Result<TaskConfig> not_pairs = TaskConfig::FromConfig(addition);
  ASSERT_FALSE(not_pairs.ok());
  EXPECT_NE(not_pairs.status().message().find("is read by task.name = \"pairs\" only"),
            std::string::npos);
}

TEST(TasksTest, CommandRewardRunsTheCommandAndNeverCrashes) {
  // The command sees the JSON line and answers with a number.
  const CommandReward length("grep -q '\"completion\":\"42\"' && echo 0.75 || echo -1", 5);
  EXPECT_DOUBLE_EQ(length.Score("12+30=", "42").reward, 0.75);
  EXPECT_DOUBLE_EQ(length.Score("12+30=", "41").reward, -1.0);
  struct Bad {
    const char* command;
    const char* reason;
  };
  for (const Bad& b :
       {Bad{"sleep 5", "timed out"}, Bad{"exec >&-; sleep 5", "timed out"},
        Bad{"sleep 5 & sleep 5", "timed out"}, Bad{"echo lots of words", "not one number"},
        Bad{"exit 3", "exited with 3"}, Bad{"no_such_command_xyz 2>/dev/null", "exited with 127"},
        Bad{"kill -9 $$", "signal 9"}, Bad{"echo 1e300", "beyond"},
        Bad{"head -c 2000000 /dev/zero | tr '\\0' 1", "more than 1 MiB"}}) {
    const RewardResult r = CommandReward(b.command, 0.5).Score("p", "c");
    EXPECT_EQ(r.reward, 0.0) << b.command;
    EXPECT_NE(r.error.find(b.reason), std::string::npos) << b.command << ": " << r.error;
  }
}

// A process that ignores SIGCHLD (inherited from whoever started it) has
// its children reaped by the kernel: the exit status is gone, and the
// command's verdict cannot be trusted.
TEST(TasksTest, CommandRewardRefusesALostExitStatus) {
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGCHLD, &ignore, &old);
  const RewardResult r = CommandReward("echo 1; exit 3", 5).Score("p", "c");
  sigaction(SIGCHLD, &old, nullptr);
  EXPECT_EQ(r.reward, 0.0);
  EXPECT_NE(r.error.find("exit status was lost"), std::string::npos) << r.error;
}

TEST(TasksTest, CommandRewardScoresManyAtOnceInOrder) {
  // The reward is the completion's number; every third one makes the command fail.
  const CommandReward echo(
      "sed -n 's/.*\"completion\":\"\\([0-9]*\\)\".*/\\1/p' | "
      "{ read n; [ $((n % 3)) -ne 0 ] || exit 7; echo $n; }",
      5);
  std::vector<std::string> completions;
  for (int i = 1; i <= 20; ++i) completions.push_back(std::to_string(i));
  std::vector<RewardInput> inputs;
  for (const std::string& c : completions) inputs.push_back({"p", c});
  for (const int at_once : {1, 4, 64}) {
    const std::vector<RewardResult> r = echo.ScoreAll(inputs, at_once);
    ASSERT_EQ(r.size(), inputs.size());
    for (int i = 1; i <= 20; ++i) {
      if (i % 3 == 0) {
        EXPECT_EQ(r[i - 1].reward, 0.0) << i;
        EXPECT_NE(r[i - 1].error.find("exited with 7"), std::string::npos) << r[i - 1].error;
      } else {
        EXPECT_EQ(r[i - 1].reward, i) << at_once;
        EXPECT_EQ(r[i - 1].error, "") << at_once;
      }
    }
  }
  EXPECT_TRUE(echo.ScoreAll({}, 4).empty());
  // A stop that never comes changes nothing.
  const std::vector<RewardResult> r = echo.ScoreAll(inputs, 4, [] { return false; });
  EXPECT_EQ(r[0].reward, 1.0);
  EXPECT_FALSE(r[0].cancelled);
  EXPECT_NE(r[2].error.find("exited with 7"), std::string::npos) << r[2].error;
}

TEST(TasksTest, CommandRewardStopsOnCancel) {
  // Commands that would run 30 s each, two at once, and a stop 0.3 s in: the
  // two in flight are killed and the rest never start, within seconds.
  const CommandReward slow("sleep 30; echo 1", 60);
  const std::vector<RewardInput> inputs(6, RewardInput{"p", "c"});
  const auto start = std::chrono::steady_clock::now();
  const auto cancel = [&] {
    return std::chrono::steady_clock::now() - start > std::chrono::milliseconds(300);
  };
  const std::vector<RewardResult> r = slow.ScoreAll(inputs, 2, cancel);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  ASSERT_EQ(r.size(), inputs.size());
  for (const RewardResult& x : r) {
    EXPECT_TRUE(x.cancelled);
    EXPECT_EQ(x.reward, 0.0);
    EXPECT_NE(x.error.find("the run was asked to stop"), std::string::npos) << x.error;
  }
}

}  // namespace
}  // namespace anvil::rl
