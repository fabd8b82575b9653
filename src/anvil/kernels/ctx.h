// KernelCtx: what every kernel call needs besides its operands — the thread
// pool, the SIMD tier (decided once, high up) and per-thread scratch memory
// allocated once and reused across calls (no allocation inside kernels).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/cpu_features.h"
#include "anvil/core/thread_pool.h"

namespace anvil::kernels {

class KernelCtx {
 public:
  // Scratch is reserved per thread; its pages are touched on first use only.
  static constexpr size_t kDefaultScratchBytes = size_t{8} << 20;

  // `amx`: bf16 GEMMs run on AMX tiles where the tier is avx512 and
  // AmxEnabled() (false: on vdpbf16ps, for tests that compare the two).
  explicit KernelCtx(ThreadPool& pool, Isa isa = BestIsa(),
                     size_t scratch_bytes_per_thread = kDefaultScratchBytes, bool amx = true);

  ThreadPool& pool() const { return *pool_; }
  int threads() const { return pool_->size(); }
  Isa isa() const { return isa_; }
  // Whether this context's bf16 GEMMs run on AMX tiles (gemm.h). Their bits
  // are not vdpbf16ps's, so two contexts that must agree bit for bit (a
  // trainer and its rollout engine) must agree on this too.
  bool amx() const { return amx_; }
  // The kernels a result's bits depend on: the tier, with "+amx" where
  // `bf16_gemms` (a model that runs bf16 GEMMs) run on tiles ("avx512+amx",
  // "avx512", "avx2", "scalar"). Two processes whose results must agree bit
  // for bit (a run and its resume, a trainer and its rollout rank) compare it.
  std::string BitsName(bool bf16_gemms) const;

  // Whether the weights decoded with this context outgrow the caches together
  // (a model's, each step): the decode GEMMs then stream B from DRAM with
  // prefetches even where one matrix alone would fit. A hint for speed; no
  // result depends on it.
  bool weights_outgrow_caches() const { return weights_outgrow_caches_; }
  void set_weights_outgrow_caches(bool outgrow) { weights_outgrow_caches_ = outgrow; }

  // Thread t's scratch (64-byte aligned); only thread t of the pool uses it,
  // except that RMSNorm backward's threads share thread 0's. So one kernel
  // call at a time per context: a call from inside a pool job (which runs
  // the kernel's threads inline) must not meet another on the same context.
  std::byte* scratch(int t) const { return scratch_[t].data(); }
  size_t scratch_bytes() const { return scratch_.empty() ? 0 : scratch_[0].size(); }

 private:
  ThreadPool* pool_;
  Isa isa_;
  bool amx_;
  bool weights_outgrow_caches_ = false;
  // Scratch contents are not part of the context's logical state: kernels
  // holding a const KernelCtx& write into their thread's buffer.
  mutable std::vector<AlignedBuffer> scratch_;
};

}  // namespace anvil::kernels
