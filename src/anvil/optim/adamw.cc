// AdamW state and update, global-norm clipping (see adamw.h).
#include "anvil/optim/adamw.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "anvil/io/flat_shards.h"
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

std::vector<double> ChunkSumsOfSquares(ThreadPool& pool, std::span<const float> x) {
  const int64_t n = static_cast<int64_t>(x.size());
  const int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(chunks);
  pool.ParallelFor(chunks, [&](int64_t begin, int64_t end, int) {
    for (int64_t c = begin; c < end; ++c) {
      const int64_t first = c * kNormChunk;
      partial[c] = ChunkSumSquares(x.data() + first, std::min(kNormChunk, n - first));
    }
  });
  return partial;
}

double NormFromChunkSums(std::span<const double> sums) {
  double total = 0;
  for (double p : sums) total += p;
  return std::sqrt(total);
}

double GlobalNorm(ThreadPool& pool, std::span<const float> x) {
  return NormFromChunkSums(ChunkSumsOfSquares(pool, x));
}

float ClipScale(double norm, double max_norm) {
  if (max_norm <= 0) return 1.0f;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1.0 ? static_cast<float>(coef) : 1.0f;
}

std::vector<ParamGroup> LlamaParamGroups(const model::LlamaParams& params, bool lm_head) {
  std::vector<ParamGroup> groups;
  bool after_skipped = false;  // a group never spans a tensor left out
  for (const model::ParamInfo& p : params.params()) {
    if (!lm_head &&
        (p.kind == model::ParamKind::kFinalNorm || p.kind == model::ParamKind::kLmHead)) {
      after_skipped = true;
      continue;
    }
    const bool decay = p.shape.size() >= 2;
    if (!groups.empty() && groups.back().decay == decay && !after_skipped) {
      groups.back().numel = p.offset + p.numel - groups.back().offset;
    } else {
      groups.push_back({p.offset, p.numel, decay});
    }
    after_skipped = false;
  }
  return groups;
}

AdamW::AdamW(const OptimConfig& config, std::vector<ParamGroup> groups, int64_t size)
    : AdamW(config, std::move(groups), size, Shard{0, size}) {}

AdamW::AdamW(const OptimConfig& config, std::vector<ParamGroup> groups, int64_t size, Shard shard)
    : config_(config),
      groups_(std::move(groups)),
      size_(size),
      shard_(shard),
      m_(static_cast<size_t>(shard.size()) * sizeof(float)),
      v_(static_cast<size_t>(shard.size()) * sizeof(float)) {
  CHECK(shard.begin >= 0 && shard.begin <= shard.end && shard.end <= size)
      << "shard [" << shard.begin << ", " << shard.end << ") of a layout of " << size;
  for (const ParamGroup& g : groups_) {
    CHECK(g.offset >= 0 && g.numel >= 0 && g.offset + g.numel <= size) << "group out of range";
  }
  m_.Zero();  // a rank may own no elements: then nothing
  v_.Zero();
}

void AdamW::Step(const kernels::KernelCtx& ctx, double lr, float grad_scale,
                 std::span<float> params, std::span<const float> grads,
                 std::span<BF16> param_bf16) {
  // Whole-layout spans are indexed by layout offset, shard-sized ones from
  // the shard's start.
  const bool shard_params = static_cast<int64_t>(params.size()) != size_;
  CHECK(!shard_params || static_cast<int64_t>(params.size()) == shard_.size())
      << "params of " << params.size() << " elements: the whole layout (" << size_
      << ") or this shard (" << shard_.size() << ")";
  CHECK(!shard_params || param_bf16.empty()) << "a bf16 copy goes with whole-layout params";
  const bool shard_grads = static_cast<int64_t>(grads.size()) != size_;
  CHECK(!shard_grads || static_cast<int64_t>(grads.size()) == shard_.size())
      << "grads of " << grads.size() << " elements: the whole layout (" << size_
      << ") or this shard (" << shard_.size() << ")";
  CHECK(param_bf16.empty() || static_cast<int64_t>(param_bf16.size()) == size_);
  ++step_;
  for (const ParamGroup& g : groups_) {
    const int64_t begin = std::max(g.offset, shard_.begin);
    const int64_t end = std::min(g.offset + g.numel, shard_.end);
    if (begin >= end) continue;
    const kernels::AdamWHyper hyper{.lr = lr,
                                    .beta1 = config_.beta1,
                                    .beta2 = config_.beta2,
                                    .eps = config_.eps,
                                    .weight_decay = g.decay ? config_.weight_decay : 0.0};
    const int64_t local = begin - shard_.begin;
    kernels::AdamWUpdate(ctx, hyper, step_, grad_scale, end - begin,
                         params.data() + (shard_params ? local : begin),
                         grads.data() + (shard_grads ? local : begin), m().data() + local,
                         v().data() + local,
                         param_bf16.empty() ? nullptr : param_bf16.data() + begin);
  }
}

Status AdamW::Save(const std::string& path) const {
  const io::FlatPart parts[] = {{"m", m().data()}, {"v", v().data()}};
  return io::WriteFlatShard(path, size_, shard_.begin, shard_.end, parts,
                            {{"step", std::to_string(step_)},
                             {"layout", "anvil flat parameter buffer"}});
}

Status AdamW::Load(std::span<const std::string> paths) {
  std::optional<int64_t> step;
  // Every file must be of one step (one checkpoint's shards).
  auto same_step = [&](const io::SafetensorsFile& file) -> Status {
    ASSIGN_OR_RETURN(const int64_t file_step, io::MetadataInt(file, "step", std::nullopt));
    if (step && *step != file_step) {
      return DataLoss(fmt::format("{}: step {} but {} has step {}", file.path(), file_step,
                                  paths[0], *step));
    }
    step = file_step;
    return Status::Ok();
  };
  const io::FlatTarget targets[] = {{"m", m().data()}, {"v", v().data()}};
  RETURN_IF_ERROR(io::ReadFlatRange(paths, size_, shard_.begin, shard_.end, targets, same_step));
  step_ = *step;
  return Status::Ok();
}

}  // namespace anvil::optim
