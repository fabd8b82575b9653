// A model's linear GEMMs with their weights packed once for decoding
// (kernels::PackedB for f32 weights and a bf16 model's bf16 copy; an FP8
// recipe's weights quantized and decoded once, kernels::PackedFp8B). A
// decode step multiplies by the same weights as the step before, and the
// GEMMs repeat work on them in every call: Gemm packs B once it is past the
// L2 or transposed (the LM head, stored [vocab, dim], always is), and an FP8
// layer quantizes its f32 weights and decodes all of them into panels for a
// row or a few. Packed, the logits keep the training forward's bits, so
// decoding stays bitwise equal to it (contract 3). Pack before decoding and
// again after the weights change (an RL update); inference only (the
// backward CHECK-fails). Costs a packed copy of the weights (bytes()): a
// bf16 model's is bf16-sized where the tier has a bf16 dot product, f32
// words (twice that) where it widens bf16 to f32. An FP8 model's layers kept
// out of FP8 in bf16 (Fp8Recipe::high_precision_bf16) pack its bf16 copy and
// round their input as Bf16Linear does.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/arena.h"
#include "anvil/kernels/gemm.h"
#include "anvil/model/forward_weights.h"
#include "anvil/model/low_precision_linear.h"

namespace anvil::model {

class Fp8Linear;

class PackedLinear : public LowPrecisionLinear {
 public:
  // For `model`'s layer weights and LM head (an f32 or bf16 model, or an FP8
  // recipe's with f32 activations; its views must outlive this), called with
  // up to `max_rows` rows (FP8: the size of the inputs' quantization
  // buffers); nothing is packed before Pack.
  PackedLinear(const ForwardWeights& model, int64_t max_rows);
  ~PackedLinear() override;

  // Packs the weights' current values for ctx's ISA tier.
  void Pack(const kernels::KernelCtx& ctx);
  int64_t bytes() const;

  // y (+)= x · w for one of the model's layer weights `w` (looked up by address).
  void Forward(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out, const float* x,
               const float* w, float* y, bool accumulate) const override;
  void BackwardData(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                    const float* dy, const float* w, float* dx) const override;
  void BackwardWeight(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                      const float* x, const float* dy, float* dw) const override;
  bool HeadLogits(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                  const float* xn, const float* lm_head, float* logits) const override;
  // A bf16 model's: its bf16 weights, packed.
  bool TakesBf16() const override { return model_.precision == Precision::kBF16; }
  bool ForwardBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                   const BF16* x, const BF16* w, float* y, bool accumulate) const override;
  bool ForwardBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                   const BF16* x, const BF16* w, BF16* y, bool accumulate) const override;
  bool HeadLogitsBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t dim, int64_t vocab,
                      const BF16* xn, const BF16* lm_head, float* logits) const override;

 private:
  // An FP8 layer's weight: quantized and decoded, and the recipe at its site
  // (fp8-delayed: the site's scales) that quantizes the inputs.
  struct Fp8Weight {
    const Fp8Linear* linear;
    kernels::PackedFp8B packed;
  };

  const ForwardWeights& model_;
  int64_t max_rows_;
  // bf16 layers' packed weights for y of type Y.
  template <typename Y>
  bool ForwardPackedBf16(const kernels::KernelCtx& ctx, int64_t n, int64_t in, int64_t out,
                         const BF16* x, const BF16* w, Y* y, bool accumulate) const;

  std::unordered_map<const float*, kernels::PackedB> layers_;  // f32 layers
  std::unordered_map<const BF16*, kernels::PackedB> bf16_layers_;
  std::unordered_map<const float*, Fp8Weight> fp8_layers_;
  // FP8 layers kept in bf16: the bf16 copy's packing, by the f32 weight, and
  // their rounded inputs [max_rows, widest].
  std::unordered_map<const float*, kernels::PackedB> kept_bf16_;
  AlignedBuffer kept_input_storage_;
  BF16* kept_input_ = nullptr;
  int64_t kept_input_size_ = 0;
  kernels::PackedB head_;
  // FP8: the recipe's buffers, and per layer and site its view of them.
  Arena fp8_arena_;
  std::shared_ptr<Fp8Linear> fp8_;
  std::vector<Fp8Linear> site_fp8_;
};

}  // namespace anvil::model
