// PPO's critic (rl/ppo.h): one value per position, read from the policy's
// own features, the LM head's input x_t (model::StepHooks::head_input):
//   v_t = w . x_t / rms(x_t) + b,   rms(x) = sqrt(mean of x^2 + eps)
// The normalisation keeps the value's scale apart from the residual
// stream's, which grows with depth. w and b start at zero: every first value
// is 0, and the trunk gets no value gradient until w has grown.
//
// Sums run in double, in index order, on the caller's thread: values and
// grads are the same bits for any thread count. The cost, a few flops a
// feature per scored position, is small beside the trunk's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::rl {

class ValueHead {
 public:
  explicit ValueHead(int64_t dim);
  int64_t dim() const { return dim_; }
  std::span<float> params() { return params_; }  // [dim + 1]: w, then b
  std::span<const float> params() const { return params_; }
  std::span<float> grads() { return grads_; }  // the same layout
  void ZeroGrads();

  // out[k] = the value of row rows[k] of x [n, dim].
  void Values(const float* x, std::span<const int64_t> rows, std::span<double> out) const;
  // grads += sum over k of dv[k] * d v(row rows[k]) / d(w, b), and
  // dx[rows[k]] += dv[k] * d v / d x (x and dx [n, dim]).
  void Backward(const float* x, std::span<const int64_t> rows, std::span<const double> dv,
                float* dx);

  // One safetensors file: "weights" [dim + 1] and metadata "dim".
  Status Save(const std::string& path) const;
  Status Load(const std::string& path);

 private:
  int64_t dim_;
  std::vector<float> params_, grads_;
};

}  // namespace anvil::rl
