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

std::vector<ShardSegment> ShardSegments(const ParamInfo& p, const ShardInfo& shard) {
  const int tp = shard.size, r = shard.rank;
  if (p.split == TpSplit::kReplicated || tp == 1) return {{0, 0, p.numel}};
  if (p.split == TpSplit::kRows) return {{0, r * p.numel, p.numel}};  // rows are row-major runs
  // Columns: each row of the slice is every part's share of that row, in part order.
  const int64_t rows = p.shape[0], local_cols = p.shape[1], global_cols = local_cols * tp;
  std::vector<ShardSegment> segments;
  segments.reserve(rows * p.column_parts.size());
  for (int64_t i = 0; i < rows; ++i) {
    int64_t local = i * local_cols, part_begin = 0;
    for (const int64_t part : p.column_parts) {
      const int64_t share = part / tp;
      segments.push_back({local, i * global_cols + part_begin + r * share, share});
      local += share;
      part_begin += part;
    }
  }
  return segments;
}

Status StageRange::Check(const ModelConfig& c) const {
  const int end = end_layer(c);
  if (first_layer < 0 || end <= first_layer || end > c.n_layers) {
    return InvalidArgument(fmt::format("pipeline stage layers [{}, {}) outside model.n_layers = {}",
                                       first_layer, end, c.n_layers));
  }
  if (c.tie_embeddings && has_embedding() != has_head(c)) {
    return InvalidArgument(
        "model.tie_embeddings with the embedding and the LM head on different pipeline stages is "
        "not implemented (their grads would need an all-reduce between the stages); untie them");
  }
  return Status::Ok();
}

Status CheckParamBuffers(const ModelConfig& config, ParamBuffers buffers) {
  if (!config.tie_embeddings || (buffers.weights && buffers.grads)) return Status::Ok();
  return InvalidArgument(
      "model.tie_embeddings = true needs the whole weights and gradient (the tied LM head is the "
      "embedding, one tensor in two units, and ZeRO-2/3 reduce and gather unit by unit): use "
      "ZeRO-1 or untied embeddings");
}

LlamaParams::LlamaParams(const ModelConfig& config, bool with_bf16, ParamBuffers buffers,
                         const ShardInfo& shard, const StageRange& stage)
    : config_(config), shard_(shard), stage_(stage) {
  CHECK(config.Validate().ok()) << config.Validate().ToString();
  params_ = Layout(config, &size_, shard, stage);
  if (buffers.weights) weights_ = AlignedBuffer(size_ * sizeof(float));
  if (buffers.grads) grads_ = AlignedBuffer(size_ * sizeof(float));
  if (with_bf16 && buffers.weights) bf16_ = AlignedBuffer(size_ * sizeof(BF16));
}

std::vector<ParamInfo> LlamaParams::Layout(const ModelConfig& config, int64_t* size,
                                           const ShardInfo& shard, const StageRange& stage) {
  const Status stage_ok = stage.Check(config);
  CHECK(stage_ok.ok()) << stage_ok.ToString();
  const BlockShape s = BlockShape::Of(config, shard);
  std::vector<ParamInfo> params;
  int64_t offset = 0;
  int index = 0;  // every tensor of the whole model counts, held or not
  const int64_t c = config.dim, v = config.vocab_size, tp = shard.size;
  const int first = stage.first_layer, end = stage.end_layer(config);
  auto add = [&](std::string name, ParamKind kind, int layer, std::vector<int64_t> shape,
                 TpSplit split = TpSplit::kReplicated, std::vector<int64_t> parts = {}) {
    const bool held = layer >= 0                  ? (layer >= first && layer < end)
                      : kind == ParamKind::kEmbed ? stage.has_embedding()
                                                  : stage.has_head(config);
    if (!held) {
      ++index;
      return;
    }
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    params.push_back({std::move(name), kind, layer, std::move(shape), offset, numel, split,
                      std::move(parts), index++});
    offset += (numel + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
  };
  add("embed", ParamKind::kEmbed, -1, {v, c});
  for (int l = 0; l < config.n_layers; ++l) {
    const std::string p = fmt::format("layers.{}.", l);
    add(p + "attn_norm", ParamKind::kAttnNorm, l, {c});
    add(p + "wqkv", ParamKind::kWqkv, l, {c, s.qkv()}, TpSplit::kColumns,
        {s.q() * tp, s.kv() * tp, s.kv() * tp});
    add(p + "wo", ParamKind::kWo, l, {s.q(), c}, TpSplit::kRows);
    add(p + "mlp_norm", ParamKind::kMlpNorm, l, {c});
    add(p + "w_gate_up", ParamKind::kWGateUp, l, {c, 2 * s.ffn}, TpSplit::kColumns,
        {s.ffn * tp, s.ffn * tp});
    add(p + "w_down", ParamKind::kWDown, l, {s.ffn, c}, TpSplit::kRows);
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
  CHECK(0 <= begin && begin <= end && end <= size_)
      << "init range [" << begin << ", " << end << ")";
  ParallelChunks(ctx, end - begin,
                 [&](int64_t b, int64_t e) { std::memset(out + b, 0, (e - b) * sizeof(float)); });
  const float residual_scale = static_cast<float>(1.0 / std::sqrt(2.0 * config_.n_layers));
  for (const ParamInfo& p : params_) {
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
    const RngStream rng(seed, RngPurpose::kInit, static_cast<uint32_t>(p.index));
    // Each run of the slice draws the whole tensor's numbers at its place there.
    for (const ShardSegment& seg : ShardSegments(p, shard_)) {
      const int64_t seg_lo = std::max(lo, p.offset + seg.local);
      const int64_t seg_hi = std::min(hi, p.offset + seg.local + seg.count);
      if (seg_lo >= seg_hi) continue;
      float* dst = t + (seg_lo - lo);
      const int64_t first = seg.global + (seg_lo - p.offset - seg.local);
      ParallelChunks(ctx, seg_hi - seg_lo, [&](int64_t b, int64_t e) {
        rng.FillNormal(std::span<float>(dst + b, e - b), 0.0f, stddev, first + b);
      });
    }
  }
}

void LlamaParams::ZeroGrads(const kernels::KernelCtx& ctx) {
  if (!has_grads()) return;
  float* g = grads().data();
  ParallelChunks(ctx, size_,
                 [&](int64_t b, int64_t e) { std::memset(g + b, 0, (e - b) * sizeof(float)); });
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
