// The machine description reads real values from this Linux machine.
#include "anvil/profile/machine.h"

#include <gtest/gtest.h>

#include "anvil/profile/peak.h"

namespace anvil::profile {
namespace {

TEST(Machine, DescribesThisMachine) {
  const MachineInfo m = DescribeMachine();
  EXPECT_GT(m.logical_cpus, 0);
  EXPECT_GT(m.memory_bytes, 1L << 28);
  ASSERT_FALSE(m.caches.empty());
  EXPECT_EQ(m.caches.front().level, 1);
  EXPECT_GT(m.caches.front().size_bytes, 4096);
}

}  // namespace
}  // namespace anvil::profile
