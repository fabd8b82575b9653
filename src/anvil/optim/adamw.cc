// AdamW state and update, global-norm clipping (see adamw.h).
#include "anvil/optim/adamw.h"

#include <fmt/core.h>

#include <cmath>
#include <cstring>

#include "anvil/io/safetensors.h"
#include "anvil/kernels/optim.h"

namespace anvil::optim {
namespace {

// Sum of squares of one chunk in double: 8 lanes (element i feeds lane i % 8),
// then the lanes in a fixed tree.
double ChunkSumSquares(const float* x, int64_t n) {
  double lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const double d = x[i + j];
      lane[j] += d * d;
    }
  }
  for (int j = 0; i < n; ++i, ++j) {
    const double d = x[i];
    lane[j] += d * d;
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

}  // namespace

double GlobalNorm(ThreadPool& pool, std::span<const float> x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(chunks);
  pool.ParallelFor(chunks, [&](int64_t begin, int64_t end, int) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * kNormChunk;
      partial[c] = ChunkSumSquares(x.data() + first, std::min(kNormChunk, n - first));
    }
  });
  double total = 0;
  for (double p : partial) total += p;
  return std::sqrt(total);
}

float ClipScale(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

std::vector<ParamGroup> LlamaParamGroups(const model::LlamaParams& params) {
  std::vector<ParamGroup> groups;
  for (const model::ParamInfo& p : params.params()) {
    const bool decay = p.shape.size() >= 2;
    if (!groups.empty() && groups.back().decay == decay) {
      groups.back().numel = p.offset + p.numel - groups.back().offset;
    } else {
      groups.push_back({p.offset, p.numel, decay});
    }
  }
  return groups;
}

AdamW::AdamW(const OptimConfig& config, std::vector<ParamGroup> groups, int64_t size)
    : config_(config),
      groups_(std::move(groups)),
      size_(size),
      m_(static_cast<size_t>(size) * sizeof(float)),
      v_(static_cast<size_t>(size) * sizeof(float)) {
  for (const ParamGroup& g : groups_) {
    CHECK(g.offset >= 0 && g.numel >= 0 && g.offset + g.numel <= size) << "group out of range";
  }
  std::memset(m_.data(), 0, m_.size());
  std::memset(v_.data(), 0, v_.size());
}

void AdamW::Step(const kernels::KernelCtx& ctx, double lr, float grad_scale,
                 std::span<float> params, std::span<const float> grads,
                 std::span<BF16> param_bf16) {
  CHECK_EQ(static_cast<int64_t>(params.size()), size_);
  CHECK_EQ(static_cast<int64_t>(grads.size()), size_);
  CHECK(param_bf16.empty() || static_cast<int64_t>(param_bf16.size()) == size_);
  ++step_;
  for (const ParamGroup& g : groups_) {
    const kernels::AdamWHyper hyper{.lr = lr,
                                    .beta1 = config_.beta1,
                                    .beta2 = config_.beta2,
                                    .eps = config_.eps,
                                    .weight_decay = g.decay ? config_.weight_decay : 0.0};
    kernels::AdamWUpdate(ctx, hyper, step_, grad_scale, g.numel, params.data() + g.offset,
                         grads.data() + g.offset, m().data() + g.offset, v().data() + g.offset,
                         param_bf16.empty() ? nullptr : param_bf16.data() + g.offset);
  }
}

Status AdamW::Save(const std::string& path) const {
  const std::vector<io::TensorRef> tensors = {
      {"m", DType::kF32, {size_}, m().data()},
      {"v", DType::kF32, {size_}, v().data()},
  };
  return io::WriteSafetensors(path, tensors,
                              {{"step", std::to_string(step_)}, {"size", std::to_string(size_)},
                               {"layout", "anvil flat parameter buffer"}});
}

Status AdamW::Load(const std::string& path) {
  ASSIGN_OR_RETURN(io::SafetensorsFile file, io::SafetensorsFile::Read(path));
  const auto it = file.metadata().find("step");
  if (it == file.metadata().end()) {
    return InvalidArgument(fmt::format("{}: metadata has no \"step\"", path));
  }
  int64_t step = 0;
  try {
    step = std::stoll(it->second);
  } catch (const std::exception&) {
    return InvalidArgument(fmt::format("{}: metadata step \"{}\" is not an integer", path,
                                       it->second));
  }
  ASSIGN_OR_RETURN(const void* m_data, file.Get("m", DType::kF32, {size_}));
  ASSIGN_OR_RETURN(const void* v_data, file.Get("v", DType::kF32, {size_}));
  std::memcpy(m().data(), m_data, static_cast<size_t>(size_) * sizeof(float));
  std::memcpy(v().data(), v_data, static_cast<size_t>(size_) * sizeof(float));
  step_ = step;
  return Status::Ok();
}

}  // namespace anvil::optim
