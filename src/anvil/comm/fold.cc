// FoldInOrder: a block of each element range is folded into a small local
// accumulator and stored once, so `out` may alias any input and the inner loop
// over one input vectorizes.
#include "anvil/comm/fold.h"

#include <algorithm>

#include "anvil/core/check.h"

namespace anvil::comm {
namespace {

constexpr int64_t kBlock = 1024;

template <typename T, typename Acc>
void Fold(ReduceOp op, std::span<const void* const> inputs, T* out, int64_t count) {
  Acc acc[kBlock];
  for (int64_t base = 0; base < count; base += kBlock) {
    const int64_t n = std::min(kBlock, count - base);
    const T* first = static_cast<const T*>(inputs[0]) + base;
    for (int64_t i = 0; i < n; ++i) acc[i] = static_cast<Acc>(first[i]);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const T* in = static_cast<const T*>(inputs[r]) + base;
      if (op == ReduceOp::kSum) {
        for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + static_cast<Acc>(in[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) {
          const Acc x = static_cast<Acc>(in[i]);
          acc[i] = acc[i] < x ? x : acc[i];
        }
      }
    }
    for (int64_t i = 0; i < n; ++i) out[base + i] = static_cast<T>(acc[i]);
  }
}

void FoldBf16(ReduceOp op, std::span<const void* const> inputs, BF16* out, int64_t count) {
  float acc[kBlock];
  for (int64_t base = 0; base < count; base += kBlock) {
    const int64_t n = std::min(kBlock, count - base);
    const BF16* first = static_cast<const BF16*>(inputs[0]) + base;
    for (int64_t i = 0; i < n; ++i) acc[i] = ToFloat(first[i]);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const BF16* in = static_cast<const BF16*>(inputs[r]) + base;
      for (int64_t i = 0; i < n; ++i) {
        const float x = ToFloat(in[i]);
        acc[i] = op == ReduceOp::kSum ? acc[i] + x : (acc[i] < x ? x : acc[i]);
      }
    }
    for (int64_t i = 0; i < n; ++i) out[base + i] = ToBF16(acc[i]);
  }
}

}  // namespace

void FoldInOrder(Type type, ReduceOp op, std::span<const void* const> inputs, void* out,
                 int64_t count) {
  CHECK(!inputs.empty()) << "fold of no inputs";
  if (count == 0) return;
  switch (type) {
    case Type::kF32: return Fold<float, float>(op, inputs, static_cast<float*>(out), count);
    case Type::kF64: return Fold<double, double>(op, inputs, static_cast<double*>(out), count);
    case Type::kI32: return Fold<int32_t, int32_t>(op, inputs, static_cast<int32_t*>(out), count);
    case Type::kI64: return Fold<int64_t, int64_t>(op, inputs, static_cast<int64_t*>(out), count);
    case Type::kBF16: return FoldBf16(op, inputs, static_cast<BF16*>(out), count);
    case Type::kBytes: break;
  }
  CHECK(false) << "bytes are moved, never reduced";
}

}  // namespace anvil::comm
