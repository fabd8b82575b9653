// The thread split every row-wise dispatcher uses: ThreadPool::ParallelFor's
// static partition, except that a single unit of work (a decode step's one
// token, one row) runs on the calling thread without waking the others; the
// calling thread is thread 0, which is the thread the partition gives it to.
#pragma once

#include <cstdint>

#include "anvil/kernels/ctx.h"

namespace anvil::kernels::rowwise_internal {

template <typename Fn>
void ParallelFor(const KernelCtx& ctx, int64_t n, Fn&& fn) {
  if (n == 1) {
    fn(int64_t{0}, int64_t{1}, 0);
    return;
  }
  ctx.pool().ParallelFor(n, fn);
}

}  // namespace anvil::kernels::rowwise_internal
