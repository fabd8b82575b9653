// SwiGLU: argument checks, the tier dispatch and the split into (token,
// column block) units across threads, plus the portable tier (F32x1).
#include "anvil/kernels/act.h"

#include <type_traits>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/act_impl.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace act_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::act::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace act_internal

namespace {

const act_internal::Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, act_internal::ScalarKernels,
                                          act_internal::Avx2Kernels, act_internal::Avx512Kernels);
}

template <typename T>
void Run(const KernelCtx& ctx, int64_t tokens, int64_t f, const T* gate_up, const T* dout, T* out,
         bool backward) {
  ANVIL_TRACE_ZONE(backward ? "swiglu_bwd" : "swiglu_fwd");
  CHECK_GE(tokens, 0) << "SwiGlu: tokens must be >= 0";
  CHECK_GT(f, 0) << "SwiGlu: f (the hidden width) must be > 0";
  CHECK(tokens == 0 || (gate_up != nullptr && out != nullptr && (!backward || dout != nullptr)))
      << "SwiGlu: gate_up, " << (backward ? "dout and dgate_up" : "out") << " must be non-null";
  const act_internal::Args<T> args{
      .f = f,
      .gate_up = gate_up,
      .dout = dout,
      .out = out,
      .prefetch = tokens * 2 * f * static_cast<int64_t>(sizeof(T)) > rowwise_internal::kL2Bytes};
  const auto& k = KernelsFor(ctx.isa());
  const auto fn = [&] {
    if constexpr (std::is_same_v<T, BF16>)
      return backward ? k.backward_bf16 : k.forward_bf16;
    else
      return backward ? k.backward_f32 : k.forward_f32;
  }();
  const int64_t units = tokens * ((f + act_internal::kBlock - 1) / act_internal::kBlock);
  rowwise_internal::ParallelFor(ctx, units,
                                [&](int64_t begin, int64_t end, int) { fn(args, begin, end); });
}

}  // namespace

void SwiGluForward(const KernelCtx& ctx, int64_t tokens, int64_t f, const float* gate_up,
                   float* out) {
  Run<float>(ctx, tokens, f, gate_up, nullptr, out, false);
}
void SwiGluForward(const KernelCtx& ctx, int64_t tokens, int64_t f, const BF16* gate_up,
                   BF16* out) {
  Run<BF16>(ctx, tokens, f, gate_up, nullptr, out, false);
}
void SwiGluBackward(const KernelCtx& ctx, int64_t tokens, int64_t f, const float* gate_up,
                    const float* dout, float* dgate_up) {
  Run<float>(ctx, tokens, f, gate_up, dout, dgate_up, true);
}
void SwiGluBackward(const KernelCtx& ctx, int64_t tokens, int64_t f, const BF16* gate_up,
                    const BF16* dout, BF16* dgate_up) {
  Run<BF16>(ctx, tokens, f, gate_up, dout, dgate_up, true);
}

}  // namespace anvil::kernels
