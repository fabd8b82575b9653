// Linear GEMMs over weights packed once (packed_linear.h).
#include "anvil/model/packed_linear.h"

#include <algorithm>

#include "anvil/core/check.h"
#include "anvil/model/fp8_linear.h"
#include "anvil/model/ops.h"

namespace anvil::model {

PackedLinear::PackedLinear(const ForwardWeights& model, int64_t max_rows)
    : model_(model), max_rows_(max_rows) {
  CHECK(model.precision == Precision::kF32 || model.precision == Precision::kBF16 ||
        IsFp8(model.precision))
      << "packed decoding GEMMs are f32, bf16 or FP8, not " << PrecisionName(model.precision);
  CHECK(model.whole()) << "packed decoding GEMMs take a whole model";
  CHECK_GT(max_rows, 0) << "PackedLinear: max_rows";
  if (!IsFp8(model.precision)) return;
  // The training forward's recipe with buffers for max_rows input rows and
  // the largest weight: counted, then carved.
  size_t bytes = 0;
  MakeFp8Linear(model.precision, model.fp8, model.shape, max_rows, [&](size_t b) -> std::byte* {
    bytes += AlignUp(b);
    return nullptr;
  });
  fp8_arena_ = Arena(bytes, "packed_fp8");
  if (model.HighPrecisionBf16() && model.fp8_high_precision_layers > 0) {
    const BlockShape& s = model.shape;
    kept_input_size_ = max_rows * std::max({s.dim, s.q(), s.ffn});
    kept_input_storage_ = AlignedBuffer(static_cast<size_t>(kept_input_size_) * sizeof(BF16));
    kept_input_ = reinterpret_cast<BF16*>(kept_input_storage_.data());
  }
  fp8_ = MakeFp8Linear(model.precision, model.fp8, model.shape, max_rows,
                       [&](size_t b) { return fp8_arena_.Allocate(b); });
  const int sites = model.config.n_layers * kLinearSites;
  site_fp8_.reserve(static_cast<size_t>(sites));
  for (int site = 0; site < sites; ++site) {
    // fp8-delayed: the model's scales, read (decoding records no amax).
    site_fp8_.push_back(model.fp8_delayed != nullptr ? fp8_->AtSite(site, model.fp8_delayed)
                                                     : *fp8_);
  }
}

PackedLinear::~PackedLinear() = default;

void PackedLinear::Pack(const kernels::KernelCtx& ctx) {
  if (model_.precision == Precision::kBF16) {
    model_.ForEachLinearBf16([&](const BF16* w, int64_t in, int64_t out) {
      const auto it = bf16_layers_.find(w);
      if (it != bf16_layers_.end()) {
        it->second.Repack(ctx);
      } else {
        bf16_layers_.emplace(w, kernels::PackedB(ctx, {.n = out, .k = in}, w));
      }
    });
    if (head_.original() != nullptr) {
      head_.Repack(ctx);
    } else {
      head_ = kernels::PackedB(
          ctx,
          {.n = model_.config.vocab_size, .k = model_.config.dim, .trans_b = kernels::Trans::kT},
          model_.Head<BF16>().lm_head);
    }
    return;
  }
  // ForEachLinear walks each layer's sites in LinearSite order, as
  // ForEachLinearBf16 does the bf16 copy's.
  std::vector<const BF16*> copies;
  if (model_.HighPrecisionBf16()) {
    model_.ForEachLinearBf16([&](const BF16* w, int64_t, int64_t) { copies.push_back(w); });
  }
  int index = 0;
  model_.ForEachLinear([&](const float* w, int64_t in, int64_t out) {
    const int layer = index / kLinearSites;
    const int site = index++;
    if (IsFp8(model_.precision) && model_.Fp8Layer(layer)) {
      Fp8Weight& entry = fp8_layers_[w];
      entry.linear = &site_fp8_[static_cast<size_t>(site)];
      entry.linear->PackWeight(ctx, in, out, w, &entry.packed);
      return;
    }
    if (!copies.empty()) {
      const auto it = kept_bf16_.find(w);
      if (it != kept_bf16_.end()) {
        it->second.Repack(ctx);
      } else {
        kept_bf16_.emplace(w, kernels::PackedB(ctx, {.n = out, .k = in}, copies[site]));
      }
      return;
    }
    const auto it = layers_.find(w);
    if (it != layers_.end()) {
      it->second.Repack(ctx);
    } else {
      layers_.emplace(w, kernels::PackedB(ctx, {.n = out, .k = in}, w));
    }
  });
  if (head_.original() != nullptr) {
    head_.Repack(ctx);
    return;
  }
  const kernels::GemmArgs head{
      .n = model_.config.vocab_size, .k = model_.config.dim, .trans_b = kernels::Trans::kT};
  head_ = model_.HighPrecisionBf16() ? kernels::PackedB(ctx, head, model_.Head<BF16>().lm_head)
                                     : kernels::PackedB(ctx, head, model_.Head<float>().lm_head);
}

int64_t PackedLinear::bytes() const {
  int64_t total = head_.bytes();
  for (const auto& [w, packed] : layers_) total += packed.bytes();
  for (const auto& [w, packed] : bf16_layers_) total += packed.bytes();
  for (const auto& [w, entry] : fp8_layers_) total += entry.packed.bytes();
  for (const auto& [w, packed] : kept_bf16_) total += packed.bytes();
  return total;
}

void PackedLinear::Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                           const float* x, const float* w, float* y, bool accumulate) const {
  CHECK_LE(n, max_rows_) << "PackedLinear: " << n << " rows, sized for " << max_rows_;
  if (const auto it = layers_.find(w); it != layers_.end()) {
    kernels::Gemm(ctx, {.m = n, .n = out, .k = in, .accumulate = accumulate}, x, it->second, y);
    return;
  }
  if (const auto it = kept_bf16_.find(w); it != kept_bf16_.end()) {
    CHECK_LE(n * in, kept_input_size_)
        << "PackedLinear: a kept layer's input of " << n << " x " << in;
    ConvertTo(ctx, x, kept_input_, n * in);
    kernels::Gemm(ctx, {.m = n, .n = out, .k = in, .accumulate = accumulate}, kept_input_,
                  it->second, y);
    return;
  }
  const auto it = fp8_layers_.find(w);
  CHECK(it != fp8_layers_.end()) << "PackedLinear: a weight it did not pack";
  it->second.linear->Forward(ctx, n, in, out, x, it->second.packed, y, accumulate);
}

bool PackedLinear::HeadLogits(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                              const float* xn, const float* lm_head, float* logits) const {
  CHECK(lm_head == head_.original()) << "PackedLinear: another model's LM head";
  kernels::Gemm(ctx, {.m = n, .n = vocab, .k = dim, .trans_b = kernels::Trans::kT}, xn, head_,
                logits);
  return true;
}

template <typename Y>
bool PackedLinear::ForwardPackedBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t in,
                                     int64_t out, const BF16* x, const BF16* w, Y* y,
                                     bool accumulate) const {
  CHECK(TakesBf16()) << "PackedLinear: bf16 activations for a " << PrecisionName(model_.precision)
                     << " model";
  CHECK_LE(n, max_rows_) << "PackedLinear: " << n << " rows, sized for " << max_rows_;
  const auto it = bf16_layers_.find(w);
  CHECK(it != bf16_layers_.end()) << "PackedLinear: a bf16 weight it did not pack";
  kernels::Gemm(ctx, {.m = n, .n = out, .k = in, .accumulate = accumulate}, x, it->second, y);
  return true;
}

bool PackedLinear::ForwardBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                               const BF16* x, const BF16* w, float* y, bool accumulate) const {
  return ForwardPackedBf16(ctx, n, in, out, x, w, y, accumulate);
}

bool PackedLinear::ForwardBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                               const BF16* x, const BF16* w, BF16* y, bool accumulate) const {
  return ForwardPackedBf16(ctx, n, in, out, x, w, y, accumulate);
}

bool PackedLinear::HeadLogitsBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t dim,
                                  int64_t vocab, const BF16* xn, const BF16* lm_head,
                                  float* logits) const {
  CHECK(lm_head == head_.original()) << "PackedLinear: another model's LM head";
  kernels::Gemm(ctx, {.m = n, .n = vocab, .k = dim, .trans_b = kernels::Trans::kT}, xn, head_,
                logits);
  return true;
}

void PackedLinear::BackwardData(const kernels::KernelCtx&, int64_t, int64_t, int64_t, const float*,
                                const float*, float*) const {
  CHECK(false) << "PackedLinear is inference only (no backward)";
}

void PackedLinear::BackwardWeight(const kernels::KernelCtx&, int64_t, int64_t, int64_t,
                                  const float*, const float*, float*) const {
  CHECK(false) << "PackedLinear is inference only (no backward)";
}

}  // namespace anvil::model
