// FP8 linear layers (see fp8_linear.h).
#include "anvil/model/fp8_linear.h"

#include <cmath>
#include <limits>

#include "anvil/core/check.h"
#include "anvil/profile/trace.h"

namespace anvil::model {

using kernels::BlockQuant;
using kernels::BlockScale;
using kernels::Fp8Format;
using kernels::Fp8Operand;
using kernels::Fp8Scaling;
using kernels::GemmArgs;
using kernels::QuantScales;
using kernels::Trans;
using Delayed = Fp8DelayedScaling;

namespace {

constexpr int64_t kBlock = 128;  // DeepSeek-V3's blocks and tiles
constexpr int64_t kMxBlock = 32;

}  // namespace

void Fp8Linear::CheckFits(const Buffers& buf, int64_t rows, int64_t k, int64_t block) {
  CHECK_LE(rows * k, buf.max_codes)
      << "FP8 operand of " << rows << " x " << k << " beyond its buffer";
  CHECK_LE(rows * ((k + block - 1) / block), buf.max_scales) << "FP8 scales beyond their buffer";
}

BlockQuant Fp8Linear::Blocks(Fp8Format format) const {
  const bool mx = recipe_.kind == Fp8Recipe::Kind::kMx;
  return {format, mx ? recipe_.mx_rule : BlockScale::kAmax, mx ? kMxBlock : kBlock};
}

Fp8Operand Fp8Linear::BlockOperand(const BlockQuant& q, const Buffers& buf) {
  const bool mx = q.scale != BlockScale::kAmax;
  return {.data = buf.codes,
          .format = q.format,
          .scaling = mx ? Fp8Scaling::kMx : Fp8Scaling::kRowBlocks,
          .scales = buf.scales,
          .e8m0 = buf.e8m0,
          .block = q.block};
}

QuantScales Fp8Linear::ScalesFor(const BlockQuant& q, const Buffers& buf) {
  return q.scale != BlockScale::kAmax ? QuantScales{.e8m0 = buf.e8m0}
                                      : QuantScales{.f32 = buf.scales};
}

Fp8Operand Fp8Linear::Rows(const kernels::KernelCtx& ctx, int64_t rows, int64_t k, const float* x,
                           Fp8Format format, const Buffers& buf) const {
  const BlockQuant q = Blocks(format);
  CheckFits(buf, rows, k, q.block);
  kernels::QuantizeRows(ctx, rows, k, x, q, buf.codes, ScalesFor(q, buf));
  return BlockOperand(q, buf);
}

Fp8Operand Fp8Linear::ColumnsTransposed(const kernels::KernelCtx& ctx, int64_t k, int64_t cols,
                                        const float* x, Fp8Format format,
                                        const Buffers& buf) const {
  const BlockQuant q = Blocks(format);
  CheckFits(buf, cols, k, q.block);
  kernels::QuantizeColumnsTransposed(ctx, k, cols, x, q, buf.codes, ScalesFor(q, buf));
  return BlockOperand(q, buf);
}

Fp8Operand Fp8Linear::Tensor(const kernels::KernelCtx& ctx, int64_t rows, int64_t cols,
                             const float* x, Fp8Format format, bool transposed,
                             Fp8DelayedScaling::Operand op, const Buffers& buf) const {
  CHECK_LE(rows * cols, buf.max_codes)
      << "FP8 operand of " << rows << " x " << cols << " beyond its buffer";
  // A non-finite amax gives a NaN scale, so the overflow reaches the output
  // (and the step's gradient check) instead of saturating away.
  const float amax = kernels::Amax(ctx, rows * cols, x);
  float scale = std::isfinite(amax) ? kernels::TensorScale(amax, format)
                                    : std::numeric_limits<float>::quiet_NaN();
  if (delayed_ != nullptr) {
    const int tensor = Fp8DelayedScaling::Index(site_, op);
    if (delayed_->recording()) delayed_->Record(tensor, amax);
    // The history's scale (values beyond it saturate); still NaN on overflow.
    if (delayed_->HasHistory(tensor) && std::isfinite(amax)) scale = delayed_->Scale(tensor);
  }
  if (transposed) {
    kernels::QuantizeTensorTransposed(ctx, rows, cols, x, scale, format, buf.codes);
  } else {
    kernels::QuantizeTensor(ctx, rows * cols, x, scale, format, buf.codes);
  }
  return {
      .data = buf.codes, .format = format, .scaling = Fp8Scaling::kTensor, .scale = 1.0f / scale};
}

Fp8Operand Fp8Linear::Tiles(const kernels::KernelCtx& ctx, int64_t rows, int64_t cols,
                            const float* w, const Buffers& buf) const {
  CheckFits(buf, rows, cols, kBlock);
  kernels::QuantizeTiles(ctx, rows, cols, w, recipe_.forward, kBlock, buf.codes, buf.scales);
  return {.data = buf.codes,
          .format = recipe_.forward,
          .scaling = Fp8Scaling::kTiles,
          .scales = buf.scales,
          .block = kBlock};
}

Fp8Operand Fp8Linear::ForwardInput(const kernels::KernelCtx& ctx, int64_t n, int64_t in,
                                    const float* x) const {
  return Tensorwise() ? Tensor(ctx, n, in, x, recipe_.forward, false, Delayed::kInput, a_)
                      : Rows(ctx, n, in, x, recipe_.forward, a_);
}

Fp8Operand Fp8Linear::ForwardWeight(const kernels::KernelCtx& ctx, int64_t in, int64_t out,
                                    const float* w, GemmArgs* g) const {
  if (Tensorwise()) {
    return Tensor(ctx, in, out, w, recipe_.forward, false, Delayed::kWeight, b_);  // w [in, out]
  }
  if (recipe_.kind == Fp8Recipe::Kind::kBlock) return Tiles(ctx, in, out, w, b_);  // as stored
  g->trans_b = Trans::kT;
  return ColumnsTransposed(ctx, in, out, w, recipe_.forward, b_);  // [out, in]: along K = in
}

void Fp8Linear::Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                        const float* x, const float* w, float* y, bool accumulate) const {
  ANVIL_TRACE_ZONE("fp8_linear_fwd");
  const Fp8Operand a = ForwardInput(ctx, n, in, x);
  GemmArgs g{.m = n, .n = out, .k = in, .accumulate = accumulate};
  const Fp8Operand b = ForwardWeight(ctx, in, out, w, &g);
  kernels::GemmFp8(ctx, g, a, b, y, recipe_.decode);
}

void Fp8Linear::PackWeight(const kernels::KernelCtx& ctx, int64_t in, int64_t out, const float* w,
                           kernels::PackedFp8B* packed) const {
  ANVIL_TRACE_ZONE("fp8_linear_pack");
  GemmArgs g{.n = out, .k = in};
  const Fp8Operand b = ForwardWeight(ctx, in, out, w, &g);
  // What ForwardInput gives (its data is not read).
  const Fp8Operand a_like = Tensorwise() ? Fp8Operand{.scaling = Fp8Scaling::kTensor}
                                         : BlockOperand(Blocks(recipe_.forward), a_);
  packed->Pack(ctx, g, a_like, b, recipe_.decode);
}

void Fp8Linear::Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                        const float* x, const kernels::PackedFp8B& w, float* y,
                        bool accumulate) const {
  ANVIL_TRACE_ZONE("fp8_linear_fwd");
  const Fp8Operand a = ForwardInput(ctx, n, in, x);
  kernels::GemmFp8(
      ctx, {.m = n, .n = out, .k = in, .trans_b = w.trans_b(), .accumulate = accumulate}, a, w, y);
}

void Fp8Linear::BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                             const float* dy, const float* w, float* dx) const {
  ANVIL_TRACE_ZONE("fp8_linear_bwd_data");
  const bool tensor = Tensorwise();
  const Fp8Operand a = tensor ? Tensor(ctx, n, out, dy, recipe_.grad, false, Delayed::kGrad, a_)
                              : Rows(ctx, n, out, dy, recipe_.grad, a_);
  // B = wᵀ [out, in]: w [in, out] is stored [n = in, k = out].
  const Fp8Operand b = tensor ? Tensor(ctx, in, out, w, recipe_.forward, false, Delayed::kWeight, b_)
                       : recipe_.kind == Fp8Recipe::Kind::kBlock
                           ? Tiles(ctx, in, out, w, b_)
                           : Rows(ctx, in, out, w, recipe_.forward, b_);
  kernels::GemmFp8(ctx, {.m = n, .n = in, .k = out, .trans_b = Trans::kT}, a, b, dx,
                   recipe_.decode);
}

void Fp8Linear::BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                               const float* x, const float* dy, float* dw) const {
  ANVIL_TRACE_ZONE("fp8_linear_bwd_weight");
  // K is the token axis: both operands quantized along it, transposed.
  const bool tensor = Tensorwise();
  const Fp8Operand a = tensor ? Tensor(ctx, n, in, x, recipe_.forward, true, Delayed::kInput, a_)
                              : ColumnsTransposed(ctx, n, in, x, recipe_.forward, a_);  // [in, n]
  const Fp8Operand b = tensor ? Tensor(ctx, n, out, dy, recipe_.grad, true, Delayed::kGrad, b_)
                              : ColumnsTransposed(ctx, n, out, dy, recipe_.grad, b_);  // [out, n]
  kernels::GemmFp8(ctx, {.m = in, .n = out, .k = n, .trans_b = Trans::kT, .accumulate = true}, a, b,
                   dw, recipe_.decode);
}

}  // namespace anvil::model
