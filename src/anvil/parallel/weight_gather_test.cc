// WeightGather's order on a group of one (the gather is a copy, so the
// values are checked too): the forward gathers each unit once with the next
// one prefetched; the backward reuses the head and the last layer still in
// the slots and gathers the rest again, the embedding never (its backward
// reads no weights).
#include "anvil/parallel/weight_gather.h"

#include <gtest/gtest.h>

#include "anvil/comm/world.h"

namespace anvil::parallel {
namespace {

TEST(WeightGather, PrefetchOrderAndValues) {
  const std::vector<int64_t> units = {0, 100, 164, 228, 292, 400};  // embed, 3 layers, head
  const int head = static_cast<int>(units.size()) - 2;
  auto group = comm::MakeLocalGroup();
  ThreadPool pool(1);
  const std::vector<int64_t> counts = {units.back()};
  WeightGather g(*group, pool, Isa::kScalar, units, counts, /*bf16=*/true);
  for (size_t i = 0; i < g.master().size(); ++i) g.master()[i] = static_cast<float>(i) + 0.5f;
  auto check = [&](int unit, const WeightGather::UnitWeights& w) {
    for (int64_t i = units[unit]; i < units[unit + 1]; ++i) {
      ASSERT_EQ(w.f32[i - units[unit]], static_cast<float>(i) + 0.5f) << "unit " << unit;
      ASSERT_EQ(ToFloat(w.bf16[i - units[unit]]), ToFloat(ToBF16(static_cast<float>(i) + 0.5f)));
    }
  };
  // Forward: unit u, then u + 1 is already on its way.
  for (int u = 0; u <= head; ++u) {
    const auto w = g.Acquire(u, u < head ? u + 1 : -1);
    check(u, w);
    EXPECT_EQ(g.gathers_started(), std::min(u + 2, head + 1)) << "after unit " << u;
  }
  // Backward: head and the last layer are resident; then one gather per layer.
  const int64_t after_forward = g.gathers_started();
  for (int u = head; u >= 1; --u) check(u, g.Acquire(u, u > 1 ? u - 1 : -1));
  EXPECT_EQ(g.gathers_started() - after_forward, head - 2);
  // New master values: nothing stale is served.
  g.Invalidate();
  g.master()[units[2]] = -1.0f;
  EXPECT_EQ(g.Acquire(2, -1).f32[0], -1.0f);
}

}  // namespace
}  // namespace anvil::parallel
