// The child process group table: the end kills the tracked groups only, and
// no group starts after it; a failed CHECK ends them.
#include "anvil/core/child_groups.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "anvil/core/check.h"
#include "anvil/core/child_groups_testing.h"

namespace anvil {
namespace {

using testing::Dead;
using testing::ForkGroup;

// Reaps `pid` if it ends within about 5 s (a broken kill must fail the test,
// not hang it).
bool EndsSoon(pid_t pid, int* status) {
  for (int i = 0; i < 5000; ++i) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    usleep(1000);
  }
  return false;
}

// A failed CHECK ends the tracked groups before the process aborts (here in
// a death test's child, which writes its group's id for the test to check).
TEST(ChildGroupsDeathTest, AFailedCheckEndsTrackedGroups) {
  const std::string file = ::testing::TempDir() + "child_groups_pid_" + std::to_string(getpid());
  std::remove(file.c_str());
  EXPECT_DEATH(
      {
        const pid_t group = SpawnTrackedGroup(ForkGroup);
        std::ofstream(file) << group << std::endl;
        CHECK(group < 0) << "planted";
      },
      "planted");
  pid_t group = 0;
  std::ifstream(file) >> group;
  ASSERT_GT(group, 0) << "the child wrote no group";
  const bool dead = testing::DiesSoon(group);
  if (!dead && getpgid(group) == group) kill(-group, SIGKILL);  // (still that group)
  std::remove(file.c_str());
  EXPECT_TRUE(dead) << "a failed CHECK left its tracked group running";
}

// SIGKILL, which no handler sees, still ends the tracked groups (the keeper
// sees the killed process's socket close), and not the untracked ones.
TEST(ChildGroupsTest, AKilledProcessStillEndsItsTrackedGroups) {
  int ids[2];
  ASSERT_EQ(pipe(ids), 0);
  const pid_t process = fork();
  ASSERT_GE(process, 0);
  if (process == 0) {
    pid_t groups[2] = {SpawnTrackedGroup(ForkGroup), SpawnTrackedGroup(ForkGroup)};
    UntrackChildGroup(groups[1]);
    (void)!write(ids[1], groups, sizeof groups);
    kill(getpid(), SIGKILL);
  }
  close(ids[1]);
  pid_t groups[2] = {0, 0};
  const bool told = read(ids[0], groups, sizeof groups) == sizeof groups;
  close(ids[0]);
  int status = 0;
  waitpid(process, &status, 0);
  ASSERT_TRUE(told && groups[0] > 0 && groups[1] > 0) << "the process started no groups";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const bool dead = testing::DiesSoon(groups[0]);
  const bool untracked_alive = !Dead(groups[1]);
  for (const pid_t g : groups) {
    if (getpgid(g) == g) kill(-g, SIGKILL);  // (still that group)
  }
  EXPECT_TRUE(dead) << "a tracked group outlived the process killed by SIGKILL";
  EXPECT_TRUE(untracked_alive) << "the keeper killed an untracked group";
}

// The keeper is a program of its own (not a fork holding this process's
// pages), in a group of its own.
TEST(ChildGroupsTest, TheKeeperIsAProgramOfItsOwn) {
  const pid_t group = SpawnTrackedGroup(ForkGroup);
  ASSERT_GT(group, 0);
  const pid_t keeper = testing::WaitForKeeperOf(getpid());
  UntrackChildGroup(group);
  kill(group, SIGKILL);
  int status = 0;
  waitpid(group, &status, 0);
  ASSERT_GT(keeper, 0) << "no keeper process of this one";
  EXPECT_NE(std::filesystem::read_symlink("/proc/" + std::to_string(keeper) + "/exe"),
            std::filesystem::read_symlink("/proc/self/exe"))
      << "the keeper runs this program's image (a fork)";
}

// (last: the end cannot be undone in this process)
TEST(ChildGroupsTest, TheEndKillsTrackedGroupsAndStartsNoMore) {
  const pid_t tracked = SpawnTrackedGroup(ForkGroup);
  const pid_t untracked = SpawnTrackedGroup(ForkGroup);
  ASSERT_GT(tracked, 0);
  ASSERT_GT(untracked, 0);
  UntrackChildGroup(untracked);
  EndChildGroups();
  int status = 0;
  const bool ended = EndsSoon(tracked, &status);
  if (!ended) {
    kill(tracked, SIGKILL);
    waitpid(tracked, &status, 0);
  }
  ASSERT_TRUE(ended) << "the tracked group outlived the end";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(waitpid(untracked, &status, WNOHANG), 0) << "an untracked group was killed";
  kill(untracked, SIGKILL);
  waitpid(untracked, &status, 0);
  bool called = false;
  EXPECT_EQ(SpawnTrackedGroup([&] {
              called = true;
              return pid_t{0};
            }),
            0);
  EXPECT_FALSE(called) << "a spawn started after the end";
}

}  // namespace
}  // namespace anvil
