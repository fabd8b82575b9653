// Delayed scaling for tensorwise FP8 (precision fp8-delayed; Transformer
// Engine's DelayedScaling recipe): each tensor of each linear GEMM site (its
// input, weight and output gradient) is quantized with a scale fixed for the
// step, computed from the amaxes of that tensor in earlier steps:
//   scale = fp8_max / reduce(history)   (kernels::TensorScale; 1 for an amax of 0)
// with reduce = max over the last `history_len` steps, or the most recent
// one. A tensor with no history yet (the first step, or never recorded) is
// scaled by its own amax, as current scaling does.
//
// While recording (the trainer's step, between BeginStep and EndStep) every
// quantization also folds its amax into the step's amax of that tensor (a
// max over micro-batches and repeated uses); EndStep pushes the step's
// amaxes (after the caller reduced them over data-parallel ranks, so every
// rank keeps the same scales) into the histories and recomputes the scales.
// A non-finite step amax is not pushed: an overflowing step keeps the
// previous scale. Evaluation and decoding read the scales without recording,
// so with a history they are batch invariant (a row's codes depend only on
// it and the fixed scale).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/kernels/quant.h"

namespace anvil::model {

class Fp8DelayedScaling {
 public:
  enum Operand : int { kInput, kWeight, kGrad, kOperands };

  Fp8DelayedScaling(int sites, int history_len, bool most_recent, kernels::Fp8Format forward,
                    kernels::Fp8Format grad);

  int tensors() const { return static_cast<int>(scale_.size()); }
  int history_len() const { return history_len_; }
  static int Index(int site, Operand op) { return site * kOperands + op; }

  bool HasHistory(int tensor) const { return count_[tensor] > 0; }
  float Scale(int tensor) const { return scale_[tensor]; }  // with a history

  bool recording() const { return recording_; }
  void BeginStep();
  void Record(int tensor, float amax);  // while recording; NaN sticks
  // This step's amaxes (one per tensor; -1 where none was recorded), for the
  // caller's max-reduction over ranks before EndStep.
  std::span<float> step_amax() { return step_amax_; }
  void EndStep();

  // The whole state as floats (scales, histories, counts and positions), for
  // checkpoints; Restore checks the length and the counts and positions, and
  // leaves the state as it was when they do not fit.
  std::vector<double> Save() const;
  bool Restore(std::span<const double> state);

 private:
  kernels::Fp8Format FormatOf(int tensor) const;
  void Rescale(int tensor);

  int history_len_;
  bool most_recent_;
  kernels::Fp8Format forward_, grad_;
  bool recording_ = false;
  std::vector<float> scale_;      // [tensors]
  std::vector<float> step_amax_;  // [tensors]
  std::vector<float> history_;    // [tensors, history_len] ring
  std::vector<int> count_, pos_;  // [tensors]: entries held, next slot
};

}  // namespace anvil::model
