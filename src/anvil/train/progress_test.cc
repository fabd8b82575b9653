// The stop signals: the first asks the run to stop and does no more; a
// second ends the process by that signal, and the process groups it started
// (reward commands) with it.
#include "anvil/train/progress.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "anvil/core/child_groups.h"
#include "anvil/core/child_groups_testing.h"

namespace anvil::train {
namespace {

// In a death test's child, which writes its group's id for the test to
// check. Its keeper (child_groups.h), which kills the tracked groups of a
// process that ended however it ended, is killed first (stopped, it would be
// woken by the kernel's SIGCONT to an orphaned group): the group must die by
// the handler's own kill.
TEST(StopSignalDeathTest, TheFirstAsksToStopTheSecondEndsTheProcessAndItsGroups) {
  const std::string file = ::testing::TempDir() + "stop_signal_group_" + std::to_string(getpid());
  std::remove(file.c_str());
  EXPECT_EXIT(
      {
        InstallStopHandler();
        const pid_t group = SpawnTrackedGroup(anvil::testing::ForkGroup);
        const pid_t keeper = anvil::testing::WaitForKeeperOf(getpid());
        std::ofstream(file) << group << std::endl;
        if (keeper <= 0) _exit(2);
        kill(keeper, SIGKILL);
        if (!anvil::testing::DiesSoon(keeper)) _exit(6);
        raise(SIGINT);
        if (!StopRequested()) _exit(3);
        if (anvil::testing::Dead(group)) _exit(4);  // the first stop ended the group
        raise(SIGINT);
        _exit(5);  // (the second signal ends the process before this)
      },
      ::testing::KilledBySignal(SIGINT), "");
  pid_t group = 0;
  std::ifstream(file) >> group;
  std::remove(file.c_str());
  ASSERT_GT(group, 0) << "the child wrote no group";
  const bool dead = anvil::testing::DiesSoon(group);
  if (!dead && getpgid(group) == group) kill(-group, SIGKILL);  // (still that group)
  EXPECT_TRUE(dead) << "a second Ctrl-C left the tracked group running";
}

}  // namespace
}  // namespace anvil::train
