// LlamaParams: the flat layout, initialisation and the bf16 shadow.
#include "anvil/model/weights.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "anvil/core/rng.h"

namespace anvil::model {
namespace {

constexpr int64_t kAlignFloats = kAlignment / sizeof(float);

// Element-wise work over [0, n) split across the pool in chunks of whole lines.
template <typename Fn>
void ParallelChunks(const kernels::KernelCtx& ctx, int64_t n, Fn&& fn) {
  constexpr int64_t kChunk = 1 << 14;
  ctx.pool().ParallelFor((n + kChunk - 1) / kChunk, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) fn(i * kChunk, std::min(n, (i + 1) * kChunk));
  });
}

}  // namespace

LlamaParams::LlamaParams(const ModelConfig& config, bool with_bf16, ParamBuffers buffers)
    : config_(config) {
  CHECK(config.Validate().ok()) << config.Validate().ToString();
  params_ = Layout(config, &size_);
  if (buffers.weights) weights_ = AlignedBuffer(size_ * sizeof(float));
  if (buffers.grads) grads_ = AlignedBuffer(size_ * sizeof(float));
  if (with_bf16 && buffers.weights) bf16_ = AlignedBuffer(size_ * sizeof(BF16));
}

std::vector<ParamInfo> LlamaParams::Layout(const ModelConfig& config, int64_t* size) {
  std::vector<ParamInfo> params;
  int64_t offset = 0;
  const int64_t c = config.dim, f = config.ffn_dim, v = config.vocab_size;
  const int64_t attn = config.n_heads * config.head_dim();
  auto add = [&](std::string name, ParamKind kind, int layer, std::vector<int64_t> shape) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    params.push_back({std::move(name), kind, layer, std::move(shape), offset, numel});
    offset += (numel + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  };
  add("embed", ParamKind::kEmbed, -1, {v, c});
  for (int l = 0; l < config.n_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    add(p + "attn_norm", ParamKind::kAttnNorm, l, {c});
    add(p + "wqkv", ParamKind::kWqkv, l, {c, config.qkv_dim()});
    add(p + "wo", ParamKind::kWo, l, {attn, c});
    add(p + "mlp_norm", ParamKind::kMlpNorm, l, {c});
    add(p + "w_gate_up", ParamKind::kWGateUp, l, {c, 2 * f});
    add(p + "w_down", ParamKind::kWDown, l, {f, c});
  }
  add("final_norm", ParamKind::kFinalNorm, -1, {c});
  if (!config.tie_embeddings) add("lm_head", ParamKind::kLmHead, -1, {v, c});
  *size = offset;
  return params;
}

void LlamaParams::Init(const kernels::KernelCtx& ctx, uint64_t seed) {
  InitRange(ctx, seed, 0, size_, weights().data());
  ZeroGrads(ctx);
  RefreshBf16(ctx);
}

void LlamaParams::InitRange(const kernels::KernelCtx& ctx, uint64_t seed, int64_t begin,
                            int64_t end, float* out) const {
  CHECK(0 <= begin && begin <= end && end <= size_) << "init range [" << begin << ", " << end << ")";
  ParallelChunks(ctx, end - begin, [&](int64_t b, int64_t e) {
    std::memset(out + b, 0, (e - b) * sizeof(float));
  });
  const float residual_scale = static_cast<float>(1.0 / std::sqrt(2.0 * config_.n_layers));
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamInfo& p = params_[i];
    // Element j of the tensor is element p.offset + j of the layout.
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
    if (lo >= hi) continue;
    float* t = out + (lo - begin);
    if (p.kind == ParamKind::kAttnNorm || p.kind == ParamKind::kMlpNorm ||
        p.kind == ParamKind::kFinalNorm) {
      std::fill(t, t + (hi - lo), 1.0f);
      continue;
    }
    float stddev = static_cast<float>(config_.init_std);
    if (p.kind == ParamKind::kWo || p.kind == ParamKind::kWDown) stddev *= residual_scale;
    const RngStream rng(seed, RngPurpose::kInit, static_cast<uint32_t>(i));
    const int64_t first = lo - p.offset;
    ParallelChunks(ctx, hi - lo, [&](int64_t b, int64_t e) {
      rng.FillNormal(std::span<float>(t + b, e - b), 0.0f, stddev, first + b);
    });
  }
}

void LlamaParams::ZeroGrads(const kernels::KernelCtx& ctx) {
  if (!has_grads()) return;
  float* g = grads().data();
  ParallelChunks(ctx, size_, [&](int64_t b, int64_t e) {
    std::memset(g + b, 0, (e - b) * sizeof(float));
  });
}

void LlamaParams::RefreshBf16(const kernels::KernelCtx& ctx) {
  if (!has_bf16() || !has_weights()) return;
  const float* w = weights().data();
  auto* out = reinterpret_cast<uint16_t*>(bf16().data());
  ParallelChunks(ctx, size_, [&](int64_t b, int64_t e) {
    F32ToBF16(ctx.isa(), std::span<const float>(w + b, e - b), std::span<uint16_t>(out + b, e - b));
  });
}

}  // namespace anvil::model
