// Status/Result behaviour and the CHECK failure path.
#include "anvil/core/status.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("configs/tiny.toml: key model.dim: must be positive, got " +
                                     std::to_string(x));
  return x;
}

Result<int> Doubled(int x) {
  ASSIGN_OR_RETURN(int v, ParsePositive(x));
  return 2 * v;
}

Status Validate(int x) {
  RETURN_IF_ERROR(ParsePositive(x).status());
  return Status::Ok();
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  const Status s = NotFound("data/brown/train.bin: no such file; run `anvil prepare` first");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not found: data/brown/train.bin: no such file; run `anvil prepare` first");
  EXPECT_EQ(s.WithContext("loading shards").message(),
            "loading shards: data/brown/train.bin: no such file; run `anvil prepare` first");
}

TEST(Result, ValueAndPropagation) {
  EXPECT_EQ(*Doubled(4), 8);
  const Result<int> bad = Doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("model.dim"), std::string::npos);
  EXPECT_TRUE(Validate(3).ok());
  EXPECT_FALSE(Validate(0).ok());
}

TEST(CheckDeathTest, FailureNamesFileLineAndMessage) {
  SetCheckRank(3);
  EXPECT_DEATH(CHECK_EQ(1 + 1, 3) << "arithmetic", "\\[rank 3\\] CHECK failed at .*status_test.cc:[0-9]+: .*arithmetic");
  SetCheckRank(-1);
  EXPECT_DEATH(
      {
        Result<int> r = InvalidArgument("nope");
        (void)r.value();
      },
      "value\\(\\) of a failed Result: invalid argument: nope");
}

TEST(CheckTest, PassingChecksDoNothing) {
  CHECK(true) << "never printed";
  CHECK_LT(1, 2);
  DCHECK(true);
}

}  // namespace
}  // namespace anvil
