// KernelCtx construction.
#include "anvil/kernels/ctx.h"

#include "anvil/core/check.h"

namespace anvil::kernels {

KernelCtx::KernelCtx(ThreadPool& pool, Isa isa, size_t scratch_bytes_per_thread, bool amx)
    : pool_(&pool), isa_(isa), amx_(amx && isa == Isa::kAvx512 && AmxEnabled()) {
  CHECK(IsaSupported(isa)) << "ISA " << IsaName(isa) << " is not supported by this CPU";
  scratch_.reserve(pool.size());
  for (int t = 0; t < pool.size(); ++t) scratch_.emplace_back(scratch_bytes_per_thread);
}

std::string KernelCtx::BitsName(bool bf16_gemms) const {
  return std::string(IsaName(isa_)) + (bf16_gemms && amx_ ? "+amx" : "");
}

}  // namespace anvil::kernels
