// A model loaded from a checkpoint: the checkpoint folder resolved,
// config.json read, the weights loaded (verified against the manifest) in
// the asked precision, and the kernel context's scratch sized for its
// attention. Decoding (generation, evaluation, rollouts) loads a decode-only
// model::InferenceModel; what also runs the training forward or trains (the
// numerics probe, an RL policy) a Llama.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/shard.h"
#include "anvil/io/checkpoint.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/config.h"
#include "anvil/model/inference_model.h"
#include "anvil/model/llama.h"

namespace anvil::infer {

struct CheckpointModel {
  io::CheckpointInfo info;
  model::ModelConfig config;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<kernels::KernelCtx> ctx;
  // One of the two: LoadInferenceModel's or LoadCheckpointModel's.
  std::unique_ptr<model::InferenceModel> inference;
  std::unique_ptr<model::Llama> llama;

  // What the decoder reads, of whichever is loaded.
  const model::ForwardWeights& forward_weights() const;
};

// A checkpoint folder (a run folder or its `latest` file resolved, verified
// against its manifest as `read` says), or a folder `anvil export` wrote:
// config.json and model.safetensors without a manifest, read as they are
// (step -1: an export does not say).
Result<io::CheckpointInfo> OpenModelFolder(const std::string& path, io::CheckpointRead read);

// A kernel context on `pool` (the best ISA) whose per-thread scratch holds
// the attention kernels' blocks of `config`, and which knows whether the
// model's weights outgrow the caches (KernelCtx::weights_outgrow_caches).
std::unique_ptr<kernels::KernelCtx> MakeModelCtx(ThreadPool& pool,
                                                 const model::ModelConfig& config);

// An FP8 recipe's settings, the train.fp8_* keys of a run's config, over
// `o`: a key absent, or "auto" (a run's that never resolved it), keeps `o`'s.
// The checkpoints' FP8 models run the recipe of the run that saved them.
Result<model::ForwardOptions> Fp8SettingsOf(Config& run, model::ForwardOptions o);

// `checkpoint`: a checkpoint folder, a run folder or its `latest` file;
// `threads` 0: ANVIL_THREADS or all cores; steps of up to `max_batch` rows of
// model.max_seq_len tokens. An FP8 precision runs the checkpoint's recipe,
// with the settings `run_fp8` gives (a new run's own) over it. `read`: the
// files whose checksums are verified (kAll for a resume that will also read
// the optimizer state). `whole_grads` false: the model holds no whole
// gradient buffer (ZeRO-2; refused for tied embeddings).
Result<CheckpointModel> LoadCheckpointModel(const std::string& checkpoint,
                                            model::Precision precision, int threads,
                                            int64_t max_batch = 1, Config* run_fp8 = nullptr,
                                            io::CheckpointRead read = io::CheckpointRead::kModel,
                                            bool whole_grads = true);
// The same checkpoint as a decode-only model (no gradients, no activations;
// the optimizer state's checksums are not verified: it is not read).
Result<CheckpointModel> LoadInferenceModel(const std::string& checkpoint,
                                           model::Precision precision, int threads);

// fp8-delayed: the amax histories of a checkpoint folder's run state
// (`anvil train`'s trainer_state.json, a post-training run's state.json)
// into `delayed`. A state without them (a run of another precision, an
// export) leaves `delayed` as it is: each tensor is then scaled by its own
// amax until it has a history.
Status RestoreDelayedScales(const std::string& dir, model::Fp8DelayedScaling* delayed);

// fp8-delayed on a checkpoint whose run state lacks histories for some FP8
// tensors (RestoreDelayedScales' fallback): a line that says so, to show the
// user (what runs is then not the recipe asked for). Empty otherwise.
std::string DelayedScalingNote(const CheckpointModel& m, model::Precision precision);

// The window length: `requested`, or the run's train.seq_len when 0; within
// the model's context.
Result<int64_t> RunSeqLen(const CheckpointModel& m, int64_t requested);

// <data_dir>/val.bin, data_dir the run's data.dir when empty (`hint` says
// what to pass instead when the run names none), checked to fit the model's
// vocabulary.
Result<data::TokenShard> OpenValidationShard(const CheckpointModel& m, std::string data_dir,
                                             const std::string& hint);

}  // namespace anvil::infer
