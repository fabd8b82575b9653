// PPO's value head (value_head.h).
#include "anvil/rl/value_head.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "anvil/core/check.h"
#include "anvil/io/flat_shards.h"
#include "anvil/io/safetensors.h"

namespace anvil::rl {
namespace {

constexpr double kRmsEps = 1e-5;

// 1 / rms(x) and w . x of one row.
struct RowTerms {
  double rstd = 0, wx = 0;
};

RowTerms Terms(const float* x, const float* w, int64_t dim) {
  double sq = 0, wx = 0;
  for (int64_t i = 0; i < dim; ++i) {
    sq += static_cast<double>(x[i]) * x[i];
    wx += static_cast<double>(w[i]) * x[i];
  }
  return {1.0 / std::sqrt(sq / static_cast<double>(dim) + kRmsEps), wx};
}

}  // namespace

ValueHead::ValueHead(int64_t dim)
    : dim_(dim),
      params_(static_cast<size_t>(dim + 1), 0.0f),
      grads_(static_cast<size_t>(dim + 1), 0.0f) {
  CHECK_GT(dim, 0);
}

void ValueHead::ZeroGrads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

void ValueHead::Values(const float* x, std::span<const int64_t> rows, std::span<double> out) const {
  CHECK_EQ(rows.size(), out.size());
  const float* w = params_.data();
  const double b = params_[dim_];
  for (size_t k = 0; k < rows.size(); ++k) {
    const RowTerms t = Terms(x + rows[k] * dim_, w, dim_);
    out[k] = t.wx * t.rstd + b;
  }
}

void ValueHead::Backward(const float* x, std::span<const int64_t> rows, std::span<const double> dv,
                         float* dx) {
  CHECK_EQ(rows.size(), dv.size());
  const float* w = params_.data();
  const double inv_dim = 1.0 / static_cast<double>(dim_);
  std::vector<double> gw(static_cast<size_t>(dim_), 0.0);
  double gb = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    const float* xr = x + rows[k] * dim_;
    float* dxr = dx + rows[k] * dim_;
    const RowTerms t = Terms(xr, w, dim_);
    // v = r (w . x) + b with r = (mean x^2 + eps)^(-1/2), dr/dx_j = -r^3 x_j / C.
    const double g = dv[k] * t.rstd;
    const double shrink = t.rstd * t.rstd * t.wx * inv_dim;
    for (int64_t j = 0; j < dim_; ++j) {
      gw[j] += g * xr[j];
      dxr[j] += static_cast<float>(g * (w[j] - xr[j] * shrink));
    }
    gb += dv[k];
  }
  for (int64_t j = 0; j < dim_; ++j) grads_[j] += static_cast<float>(gw[j]);
  grads_[dim_] += static_cast<float>(gb);
}

Status ValueHead::Save(const std::string& path) const {
  const io::FlatPart parts[] = {{"weights", params_.data()}};
  const int64_t size = dim_ + 1;
  return io::WriteFlatShard(path, size, 0, size, parts,
                            {{"dim", std::to_string(dim_)}, {"layout", "anvil value head: w, b"}});
}

Status ValueHead::Load(const std::string& path) {
  const int64_t size = dim_ + 1;
  auto same_dim = [&](const io::SafetensorsFile& file) -> Status {
    ASSIGN_OR_RETURN(const int64_t dim, io::MetadataInt(file, "dim", std::nullopt));
    if (dim != dim_) {
      return DataLoss(
          fmt::format("{}: a value head of dim {}, the model's is {}", path, dim, dim_));
    }
    return Status::Ok();
  };
  const io::FlatTarget targets[] = {{"weights", params_.data()}};
  return io::ReadFlatRange(std::span<const std::string>(&path, 1), size, 0, size, targets,
                           same_dim);
}

}  // namespace anvil::rl
