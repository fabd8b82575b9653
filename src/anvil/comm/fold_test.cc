// FoldInOrder against a sequential left fold, with the output aliasing an input.
#include "anvil/comm/fold.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace anvil::comm {
namespace {

TEST(Fold, LeftToRightInEachTypeAndInPlace) {
  const int64_t n = 3000;  // crosses the fold's block size
  std::vector<std::vector<float>> in(4, std::vector<float>(n));
  for (int r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < n; ++i) in[r][i] = r == 0 ? (i % 2 ? -1e8f : 1e8f) : 3.0f + static_cast<float>(r + i % 5);
  }
  std::vector<float> expect(n);
  for (int64_t i = 0; i < n; ++i) expect[i] = ((in[0][i] + in[1][i]) + in[2][i]) + in[3][i];
  const std::vector<const void*> ptrs = {in[0].data(), in[1].data(), in[2].data(), in[3].data()};
  FoldInOrder(Type::kF32, ReduceOp::kSum, ptrs, in[2].data(), n);  // out aliases input 2
  EXPECT_EQ(std::memcmp(in[2].data(), expect.data(), n * sizeof(float)), 0);

  // Another order gives other bits here: the check above can fail.
  const float a = 1e8f, b = 5.0f, c = 5.0f;  // ulp(1e8) = 8
  EXPECT_NE((a + b) + c, a + (b + c));
}

TEST(Fold, Bf16FoldsInF32AndRoundsOnce) {
  // 256 + 1 + 1 in bf16 steps would stay 256; in f32 it is 258, exact in bf16.
  const BF16 x[3] = {ToBF16(256.0f), ToBF16(1.0f), ToBF16(1.0f)};
  BF16 out;
  const std::vector<const void*> ptrs = {&x[0], &x[1], &x[2]};
  FoldInOrder(Type::kBF16, ReduceOp::kSum, ptrs, &out, 1);
  EXPECT_EQ(ToFloat(out), 258.0f);
}

TEST(Fold, MaxAndIntegers) {
  const int64_t a[2] = {5, -7}, b[2] = {3, 9};
  int64_t out[2];
  const std::vector<const void*> ptrs = {a, b};
  FoldInOrder(Type::kI64, ReduceOp::kMax, ptrs, out, 2);
  EXPECT_EQ(out[0], 5);
  EXPECT_EQ(out[1], 9);
  FoldInOrder(Type::kI64, ReduceOp::kSum, ptrs, out, 2);
  EXPECT_EQ(out[0], 8);
  EXPECT_EQ(out[1], 2);
}

}  // namespace
}  // namespace anvil::comm
