// AdamW over the model's flat f32 buffers: m and v share the parameters'
// layout, so one offset addresses weight, grad, m and v. Gradient clipping by
// global L2 norm is a grad scale applied inside the fused update
// (kernels::AdamWUpdate), which also writes the bf16 shadow in the same pass.
//
// Weight-decay rule: decay applies to tensors of rank >= 2 (embedding, linear
// layers, LM head) and never to rank-1 tensors (the RMSNorm gains) — decaying
// a gain pulls it toward 0 and shrinks the whole activation.
//
// Determinism: the global norm sums squares in double over fixed chunks of
// kNormChunk elements (each chunk in a fixed lane order), then adds the chunk
// sums in index order; threads only pick which chunks they compute, so the
// norm has the same bits for any thread count.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/core/status.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/weights.h"
#include "anvil/optim/schedule.h"

namespace anvil::optim {

inline constexpr int64_t kNormChunk = 16384;

// The L2 norm of `x`, in double, bitwise the same for any pool size.
double GlobalNorm(ThreadPool& pool, std::span<const float> x);
// Its two halves, for a buffer sharded over ranks at multiples of
// kNormChunk: the sums of squares of each chunk of `x` (the last may be
// short), and the norm from all chunks' sums added in index order. Gathering
// every shard's sums in rank order gives the norm of the whole buffer, bitwise.
std::vector<double> ChunkSumsOfSquares(ThreadPool& pool, std::span<const float> x);
double NormFromChunkSums(std::span<const double> sums);

// The grad scale that clips a norm to `max_norm` (PyTorch's clip_grad_norm_:
// max_norm / (norm + 1e-6) when that is below 1, else 1; 1 when max_norm is 0).
float ClipScale(double norm, double max_norm);

// A contiguous range of the flat buffers updated with one decay setting.
struct ParamGroup {
  int64_t offset = 0;
  int64_t numel = 0;
  bool decay = true;
};

// The groups of a Llama layout by the rule above; adjacent tensors with the
// same setting merge (their zero padding included: it stays zero).
// `lm_head` false: a trunk whose LM head never runs (model::LlamaOptions::
// lm_head, PPO's separate critic) leaves the final norm and an untied LM
// head out, so AdamW neither decays nor moves weights nothing reads.
std::vector<ParamGroup> LlamaParamGroups(const model::LlamaParams& params, bool lm_head = true);

// The elements [begin, end) of the flat buffers one optimizer owns: its
// shard under ZeRO, the whole buffer otherwise.
struct Shard {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

class AdamW {
 public:
  // m and v for the elements of `shard` of a `size`-element layout, zeroed
  // (first touch happens here, once). Without a shard: the whole buffer.
  AdamW(const OptimConfig& config, std::vector<ParamGroup> groups, int64_t size);
  AdamW(const OptimConfig& config, std::vector<ParamGroup> groups, int64_t size, Shard shard);

  // One update at schedule LR `lr`: increments step(), then runs the fused
  // update with grad scale `grad_scale` over the shard's part of each group.
  // `params` and `grads` are each the whole layout (`size` elements; only the
  // shard is read or written) or the shard's part alone (ZeRO-3 keeps only
  // that); `param_bf16` is empty (no copy) or the whole layout. Elementwise:
  // a shard gets bitwise what the whole-buffer update gives it.
  void Step(const kernels::KernelCtx& ctx, double lr, float grad_scale, std::span<float> params,
            std::span<const float> grads, std::span<BF16> param_bf16);

  int64_t step() const { return step_; }  // updates done so far
  int64_t size() const { return size_; }  // the whole layout
  const Shard& shard() const { return shard_; }
  // The moments of the shard's elements ([shard().size()]).
  std::span<float> m() { return {reinterpret_cast<float*>(m_.data()), static_cast<size_t>(shard_.size())}; }
  std::span<float> v() { return {reinterpret_cast<float*>(v_.data()), static_cast<size_t>(shard_.size())}; }
  std::span<const float> m() const {
    return {reinterpret_cast<const float*>(m_.data()), static_cast<size_t>(shard_.size())};
  }
  std::span<const float> v() const {
    return {reinterpret_cast<const float*>(v_.data()), static_cast<size_t>(shard_.size())};
  }

  // One safetensors file of the shard: tensors "m" and "v" [shard size] (f32,
  // flat in the parameters' layout), metadata "step", "size" (the whole
  // layout), "shard_begin" and "shard_end" (absent: the whole buffer).
  Status Save(const std::string& path) const;
  // Restores step and this optimizer's shard of m and v from files saved by
  // any sharding of the same layout (each file gives the overlap of its range
  // with this shard); every element must be covered and every file's step
  // the same. Errors name the file and what differs.
  Status Load(std::span<const std::string> paths);

 private:
  OptimConfig config_;
  std::vector<ParamGroup> groups_;
  int64_t size_;
  Shard shard_;
  int64_t step_ = 0;
  AlignedBuffer m_, v_;
};

}  // namespace anvil::optim
