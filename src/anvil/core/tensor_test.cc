// Tensor views share storage and address the right elements; the arena
// aligns, tracks its high-water mark and refuses to overflow.
#include "anvil/core/tensor.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "anvil/core/arena.h"

namespace anvil {
namespace {

Tensor Iota(const Shape& shape) {
  Tensor t = Tensor::Empty(DType::kF32, shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i);
  return t;
}

float At(const Tensor& t, std::initializer_list<int64_t> index) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : index) off += i * t.stride(d++);
  return t.data<float>()[off];
}

TEST(Tensor, EmptyIsContiguousAndAligned) {
  const Tensor t = Tensor::Empty(DType::kBF16, {3, 5, 7});
  EXPECT_EQ(t.numel(), 105);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.stride(0), 35);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % kAlignment, 0u);
  EXPECT_EQ(t.ToString(), "bf16[3, 5, 7] strides [35, 7, 1] offset 0");
}

TEST(Tensor, SliceSelectTransposeAreViews) {
  const Tensor t = Iota({4, 6});
  const Tensor rows = t.Slice(0, 1, 3);  // rows 1..2
  EXPECT_EQ(rows.shape(), (Shape{2, 6}));
  EXPECT_EQ(At(rows, {0, 0}), 6.0f);
  EXPECT_EQ(rows.raw(), t.data<float>() + 6);  // no copy

  const Tensor cols = t.Slice(1, 2, 5);
  EXPECT_FALSE(cols.is_contiguous());
  EXPECT_EQ(At(cols, {3, 2}), 3 * 6 + 4.0f);

  const Tensor row2 = t.Select(0, 2);
  EXPECT_EQ(row2.shape(), (Shape{6}));
  EXPECT_EQ(At(row2, {5}), 17.0f);
  const Tensor col4 = t.Select(1, 4);
  EXPECT_EQ(col4.shape(), (Shape{4}));
  EXPECT_EQ(col4.stride(0), 6);
  EXPECT_EQ(At(col4, {3}), 22.0f);

  const Tensor tt = t.Transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{6, 4}));
  EXPECT_EQ(At(tt, {5, 3}), At(t, {3, 5}));

  // Writes through a view land in the shared storage.
  rows.data<float>()[0] = -1.0f;
  EXPECT_EQ(At(t, {1, 0}), -1.0f);
}

TEST(Tensor, ReshapeAndBorrow) {
  float buffer[24];
  for (int i = 0; i < 24; ++i) buffer[i] = static_cast<float>(i);
  const Tensor t = Tensor::Borrow(buffer, DType::kF32, {2, 3, 4});
  const Tensor r = t.Reshape({6, 4});
  EXPECT_EQ(At(r, {5, 3}), 23.0f);
  EXPECT_EQ(r.raw(), buffer);
}

TEST(Tensor, SubByteViews) {
  const Tensor t = Tensor::Empty(DType::kI4, {4, 8});  // 16 bytes
  const Tensor row = t.Select(0, 1);
  EXPECT_EQ(static_cast<std::byte*>(row.raw()) - static_cast<std::byte*>(t.raw()), 4);
}

TEST(TensorDeathTest, MisuseIsCaught) {
  const Tensor t = Iota({4, 6});
  EXPECT_DEATH(t.Slice(0, 2, 5), "slice \\[2, 5\\) of extent 4");
  EXPECT_DEATH(t.data<uint16_t>(), "typed access to a f32 tensor with a 2-byte type");
  EXPECT_DEATH(t.Transpose(0, 1).Reshape({24}), "reshape of a non-contiguous view");
  const Tensor odd = Tensor::Empty(DType::kI4, {3, 3});
  EXPECT_DEATH(odd.Select(0, 1).raw(), "sub-byte view must start on a byte boundary");
}

TEST(Arena, AlignsTracksHighWaterAndResets) {
  Arena arena(1 << 16, "test scratch");
  std::byte* a = arena.Allocate(10);
  std::byte* b = arena.Allocate(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % kAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % kAlignment, 0u);
  EXPECT_EQ(b - a, 64);
  const size_t mark = arena.Mark();
  const Tensor t = Tensor::FromArena(arena, DType::kF32, {16, 16});
  EXPECT_EQ(static_cast<std::byte*>(t.raw()), b + 128);
  EXPECT_EQ(arena.used(), 64u + 128u + 1024u);
  arena.ResetTo(mark);
  EXPECT_EQ(arena.used(), 192u);
  EXPECT_EQ(arena.high_water(), 64u + 128u + 1024u);
  arena.Reset();
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_DEATH(arena.Allocate(1 << 17), "arena 'test scratch' is too small");
}

}  // namespace
}  // namespace anvil
