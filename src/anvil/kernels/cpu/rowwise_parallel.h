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

// The L2 of the two cores these kernels are tuned on (2 x 1 MiB). Inputs
// larger than this come from L3 or DRAM, and the loops that would wait on
// them ask for their next lines ahead (simd.h's PrefetchL2). Whatever the
// pool's size: one thread, with its 1 MiB, asks only from 2 MiB on too.
inline constexpr int64_t kL2Bytes = int64_t{2} << 20;

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
