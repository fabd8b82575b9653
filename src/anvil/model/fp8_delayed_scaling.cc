// Delayed scaling's histories and scales (fp8_delayed_scaling.h).
#include "anvil/model/fp8_delayed_scaling.h"

#include <algorithm>
#include <cmath>

#include "anvil/core/check.h"

namespace anvil::model {

Fp8DelayedScaling::Fp8DelayedScaling(int sites, int history_len, bool most_recent,
                                     kernels::Fp8Format forward, kernels::Fp8Format grad)
    : history_len_(history_len), most_recent_(most_recent), forward_(forward), grad_(grad) {
  CHECK(sites > 0 && history_len > 0) << "delayed scaling: sites " << sites << ", history "
                                      << history_len;
  const int n = sites * kOperands;
  scale_.assign(n, 1.0f);
  step_amax_.assign(n, -1.0f);
  history_.assign(static_cast<size_t>(n) * history_len, 0.0f);
  count_.assign(n, 0);
  pos_.assign(n, 0);
}

kernels::Fp8Format Fp8DelayedScaling::FormatOf(int tensor) const {
  return tensor % kOperands == kGrad ? grad_ : forward_;
}

void Fp8DelayedScaling::BeginStep() {
  std::fill(step_amax_.begin(), step_amax_.end(), -1.0f);
  recording_ = true;
}

void Fp8DelayedScaling::Record(int tensor, float amax) {
  float& a = step_amax_[tensor];
  if (std::isnan(a)) return;  // NaN sticks
  a = std::isnan(amax) ? amax : std::max(a, amax);
}

void Fp8DelayedScaling::Rescale(int tensor) {
  const float* h = history_.data() + static_cast<size_t>(tensor) * history_len_;
  float amax;
  if (most_recent_) {
    amax = h[(pos_[tensor] + history_len_ - 1) % history_len_];
  } else {
    amax = *std::max_element(h, h + count_[tensor]);
  }
  scale_[tensor] = kernels::TensorScale(amax, FormatOf(tensor));
}

void Fp8DelayedScaling::EndStep() {
  recording_ = false;
  for (int t = 0; t < tensors(); ++t) {
    const float a = step_amax_[t];
    if (!(a >= 0) || !std::isfinite(a)) continue;  // not recorded, or overflowed
    history_[static_cast<size_t>(t) * history_len_ + pos_[t]] = a;
    pos_[t] = (pos_[t] + 1) % history_len_;
    count_[t] = std::min(count_[t] + 1, history_len_);
    Rescale(t);
  }
}

std::vector<double> Fp8DelayedScaling::Save() const {
  std::vector<double> state;
  state.reserve(history_.size() + 3 * scale_.size());
  for (int t = 0; t < tensors(); ++t) {
    state.push_back(scale_[t]);
    state.push_back(count_[t]);
    state.push_back(pos_[t]);
    for (int i = 0; i < history_len_; ++i) {
      state.push_back(history_[static_cast<size_t>(t) * history_len_ + i]);
    }
  }
  return state;
}

bool Fp8DelayedScaling::Restore(std::span<const double> state) {
  if (state.size() != static_cast<size_t>(tensors()) * (3 + history_len_)) return false;
  // Checked whole before anything changes: a state that does not fit leaves this one as it was.
  for (size_t at = 0; at < state.size(); at += 3 + history_len_) {
    const double count = state[at + 1], pos = state[at + 2];
    if (!(count >= 0 && count <= history_len_ && pos >= 0 && pos < history_len_)) return false;
  }
  const double* s = state.data();
  for (int t = 0; t < tensors(); ++t) {
    scale_[t] = static_cast<float>(*s++);
    count_[t] = static_cast<int>(*s++);
    pos_[t] = static_cast<int>(*s++);
    for (int i = 0; i < history_len_; ++i) {
      history_[static_cast<size_t>(t) * history_len_ + i] = static_cast<float>(*s++);
    }
  }
  return true;
}

}  // namespace anvil::model
