// What every row-wise dispatcher shares: the kernel table of the chosen tier,
// and the thread split (ThreadPool::ParallelFor's static partition, except
// that a single unit of work — a decode step's one token, one row — runs on
// the calling thread without waking the others; the calling thread is thread
// 0, which is the thread the partition gives it to).
#pragma once

#include <cstdint>

#include "anvil/core/cpu_features.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels::rowwise_internal {

// A family's table for `isa`, from its three per-tier accessors.
template <class Kernels>
const Kernels& KernelsForTier(Isa isa, const Kernels& (*scalar)(), const Kernels& (*avx2)(),
                              const Kernels& (*avx512)()) {
  switch (isa) {
    case Isa::kAvx512:
      return avx512();
    case Isa::kAvx2:
      return avx2();
    case Isa::kScalar:
      break;
  }
  return scalar();
}

template <typename Fn>
void ParallelFor(const KernelCtx& ctx, int64_t n, Fn&& fn) {
  if (n == 1) {
    fn(int64_t{0}, int64_t{1}, 0);
    return;
  }
  ctx.pool().ParallelFor(n, fn);
}

}  // namespace anvil::kernels::rowwise_internal
