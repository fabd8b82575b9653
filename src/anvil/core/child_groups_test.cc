// The child process group table: the end kills the tracked groups only, and
// no group starts after it.
#include "anvil/core/child_groups.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace anvil {
namespace {

// A child in a process group of its own (as a reward command is), waiting.
pid_t ForkGroup() {
  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    pause();
    _exit(0);
  }
  if (child > 0) setpgid(child, child);  // (either side may run first)
  return child;
}

// Reaps `pid` if it ends within about 5 s (a broken kill must fail the test,
// not hang it).
bool EndsSoon(pid_t pid, int* status) {
  for (int i = 0; i < 5000; ++i) {
    if (waitpid(pid, status, WNOHANG) == pid) return true;
    usleep(1000);
  }
  return false;
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
