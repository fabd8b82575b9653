// PlanBuckets: whole tensors, reverse order, every element in exactly one bucket.
#include "anvil/parallel/data_parallel.h"

#include <gtest/gtest.h>

namespace anvil::parallel {
namespace {

TEST(PlanBuckets, WholeTensorsFromTheEnd) {
  const std::vector<int64_t> begins = {0, 100, 110, 400, 420, 900};
  const auto b = PlanBuckets(begins, 1000, 250);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].begin, 420);  // [900,1000) is 100 < 250, with [420,900) 580
  EXPECT_EQ(b[0].end, 1000);
  EXPECT_EQ(b[1].begin, 110);  // [400,420) + [110,400) = 310
  EXPECT_EQ(b[1].end, 420);
  EXPECT_EQ(b[2].begin, 0);    // the rest, smaller than a bucket
  EXPECT_EQ(b[2].end, 110);
  const auto one = PlanBuckets(begins, 1000, int64_t{1} << 40);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].begin, 0);
  EXPECT_EQ(one[0].end, 1000);
  const auto each = PlanBuckets(begins, 1000, 1);
  EXPECT_EQ(each.size(), begins.size());
}

}  // namespace
}  // namespace anvil::parallel
