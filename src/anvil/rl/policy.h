// The model a post-training run trains (anvil sft, anvil rl): a Llama with
// its tokenizer, threads and kernel context, made fresh or loaded from a
// checkpoint, and the checkpoints those runs write. A post-training
// checkpoint is self-contained: beside the Hugging Face weights
// (model.safetensors, config.json) it holds its tokenizer.json, so
// `anvil generate --ckpt` works on it without the data it came from, plus
// AdamW's state (optimizer.safetensors, or under ZeRO-1/2 one file per trainer
// rank: optimizer-00000-of-00002.safetensors ...), state.json (the run's
// counters) and config.toml.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/tokenizer.h"
#include "anvil/io/checkpoint.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/config.h"
#include "anvil/model/llama.h"
#include "anvil/optim/adamw.h"

namespace anvil::rl {

struct Policy {
  model::ModelConfig config;
  data::Tokenizer tokenizer;
  std::unique_ptr<ThreadPool> pool = nullptr;
  std::unique_ptr<kernels::KernelCtx> ctx = nullptr;
  std::unique_ptr<model::Llama> llama = nullptr;

  // bos, then the text's tokens: what a rollout starts from.
  std::vector<int32_t> PromptTokens(std::string_view text) const;
  // The text's tokens, then eos: what the policy should answer.
  std::vector<int32_t> ResponseTokens(std::string_view text) const;
  // The text of generated tokens, a final eos dropped ("?" for an id beyond
  // the tokenizer's vocabulary).
  std::string Text(std::span<const int32_t> tokens) const;
  int32_t eos() const { return static_cast<int32_t>(tokenizer.eos_id()); }
  // The kernels its GEMMs run (KernelCtx::BitsName, model::RunsBf16Gemms):
  // trainer ranks, and a rollout rank and its trainer, must run the same.
  std::string Kernels() const;
};

struct PolicyOptions {
  model::Precision precision = model::Precision::kF32;  // f32 or bf16
  int64_t max_batch = 1;  // rows of model.max_seq_len tokens a step may hold
  int threads = 0;        // 0: ANVIL_THREADS or all cores
  // FP8: the run's config, whose train.fp8_* keys (infer::Fp8SettingsOf)
  // set the recipe, over a loaded checkpoint's; null: the checkpoint's, or
  // the defaults.
  Config* fp8_settings = nullptr;
  // The model's whole gradient buffer. False under ZeRO-2: each unit's
  // backward writes into data parallelism's slot for it (TrainerRanks), and
  // the model must have untied embeddings.
  bool whole_grads = true;
  // LoadPolicy's checksums: the model's files (a new run's start), or all
  // (a resume, which also reads the optimizer state).
  io::CheckpointRead verify = io::CheckpointRead::kModel;
};

// A policy with weights initialised from `seed` (LlamaParams::Init). The
// model's vocabulary must hold the tokenizer's.
Result<Policy> NewPolicy(const model::ModelConfig& config, data::Tokenizer tokenizer,
                         uint64_t seed, const PolicyOptions& options);

// The weights and tokenizer of a checkpoint (a checkpoint folder, a run
// folder or its `latest`): a post-training checkpoint, or a pre-training one
// whose run data still holds its tokenizer. `dir_out`: the folder loaded.
Result<Policy> LoadPolicy(const std::string& checkpoint, const PolicyOptions& options,
                          std::string* dir_out = nullptr);

// A frozen model of a checkpoint's weights on `policy`'s threads, in its
// precision (the reference of a KL penalty); the checkpoint must hold a
// model of the policy's shape. Steps of up to `max_batch` rows. `lm_head`
// false: a trunk without it (LlamaOptions::lm_head; PPO's separate critic).
// fp8-delayed: with the checkpoint's amax histories, where it has them.
Result<std::unique_ptr<model::Llama>> LoadReference(const std::string& checkpoint,
                                                    const Policy& policy, int64_t max_batch,
                                                    bool lm_head = true);

// fp8-delayed: when some forward tensor of `model` has no amax history yet
// (loaded from a checkpoint of another precision), one recorded step of a
// forward of each of `prompts` alone (an entry in every forward tensor's
// history), so every rank and every layout of a run records the same
// amaxes; decoding then runs on fixed scales. Returns whether it recorded
// (false: another precision, or every forward tensor had a history).
bool StartDelayedScales(model::Llama& model, const kernels::KernelCtx& ctx,
                        std::span<const std::vector<int32_t>> prompts);

// The AdamW of a policy's parameters (weight decay on matrices only), for
// `shard` of them (ZeRO-1: this rank's; the whole layout by default).
std::unique_ptr<optim::AdamW> PolicyOptimizer(const Policy& policy,
                                              const optim::OptimConfig& config,
                                              std::optional<optim::Shard> shard = std::nullopt);

// More files of a checkpoint, written into its folder (before the commit
// checksums them), e.g. PPO's value head.
using ExtraFiles = std::function<Status(const std::string& dir)>;

// A checkpoint's files but AdamW's, into `dir` (a checkpoint's temporary
// folder): the weights, tokenizer.json, and `state_json` and `config_toml`
// as given.
Status WritePolicyFiles(const std::string& dir, const Policy& policy, const std::string& state_json,
                        const std::string& config_toml);

}  // namespace anvil::rl
