// The pre-training step loop: micro-batches with gradient accumulation
// (loss_scale = 1 / counted targets of the whole step), global-norm clipping,
// AdamW, periodic validation, metrics, checkpoints and bitwise resume.
// Orchestration only: the math is in model/ and optim/, the collectives in
// parallel/ and comm/.
//
// Data parallel (parallel.dp ranks, started by mpirun): every rank runs this
// same loop on its own micro-batches of each global step; micro-batch i of
// rank r is slot i * dp + r of the step's dp x grad_accum slots, so the data
// of a step does not depend on the layout, only on the global batch. Losses,
// the loss scale, the gradient norm, validation and stop decisions are global
// and the same bits on every rank; rank 0 alone writes metrics, config and
// the shared files of a checkpoint, each rank of a ZeRO run its shards.
//
// A run directory holds config.toml (the resolved config), metrics.jsonl (one
// JSON object per step, plus val_loss lines), machine.json (the machine of the
// latest session: report_machine.h), trace.json (with tracing), and
// checkpoints step_<N>/ with a `latest` pointer (io/checkpoint.h). A
// checkpoint holds config.json (Hugging Face), the weights as
// model.safetensors (Hugging Face Llama names; one process or ZeRO-0) or, under
// ZeRO-1..3, one weights-<rank>-of-<ranks>.safetensors per rank (a range of
// the flat layout; model/checkpoint_weights.h), optimizer.safetensors (AdamW
// m, v, step; under ZeRO-1..3 one optimizer-<rank>-of-<ranks>.safetensors per
// rank), trainer_state.json (step, loader position, seed, LR, tokens seen,
// layout), checkpoint_index.json (the layout, every tensor's shape and flat
// offset, which file holds which range) and config.toml. `anvil export`
// writes one Hugging Face folder from any of them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/loader.h"
#include "anvil/data/shard.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/llama.h"
#include "anvil/optim/adamw.h"
#include "anvil/parallel/config.h"
#include "anvil/parallel/data_parallel.h"
#include "anvil/parallel/plan.h"
#include "anvil/parallel/weight_gather.h"
#include "anvil/profile/peak.h"
#include "anvil/train/config.h"
#include "anvil/train/metrics.h"
#include "anvil/train/probe.h"

namespace anvil::train {

struct RunOptions {
  std::string run_dir;           // created if missing
  bool resume = false;           // continue from run_dir's latest checkpoint
  bool trace = false;            // write run_dir/trace.json of a few steps
  bool probe = false;            // write run_dir/probe.jsonl (probe.h) of train.probe_steps steps
  std::string probe_fault = {};  // "NAME=FACTOR": scale a probed tensor (testing the probe)
  double peak_gflops = 0;        // MFU denominator; 0: measure at startup
  // Measures the peaks: at startup when peak_gflops is 0 or a precision
  // choice is "auto", and once more if a step outruns the measured one
  // (Trainer::RecheckPeak). Null: profile::MeasurePeakFlops.
  std::function<profile::PeakFlops(ThreadPool&)> measure_peak = nullptr;
  bool write_metrics = true;     // metrics.jsonl (rank 0)
  // The job's ranks (comm::InitWorld); null: this process alone.
  std::shared_ptr<comm::Group> world = nullptr;
};

// What the loop reports to its caller (progress display, tests).
struct Hooks {
  std::function<void(const StepMetrics&)> on_step = nullptr;
  std::function<void(const EvalMetrics&)> on_eval = nullptr;
  std::function<void(const std::string& message)> on_message = nullptr;
  // train.steps changed (fitted to train.time_budget_minutes).
  std::function<void(int64_t total_steps)> on_schedule = nullptr;
  // Polled before each step; true stops the run after a checkpoint.
  std::function<bool()> stop_requested = nullptr;
};

struct RunSummary {
  int64_t first_step = 0;  // steps done before this session (resume)
  int64_t steps_done = 0;  // steps done at the end (total)
  bool interrupted = false;   // stop_requested ended the run early
  bool time_limited = false;  // train.max_minutes ended it
  std::optional<double> final_val_loss;
  std::string checkpoint;  // the last checkpoint written
  double seconds = 0;
};

// Bytes this rank holds for the model's state (allocated, not estimated).
struct StateMemory {
  int64_t params = 0;        // Ψ: elements of the flat parameter layout
  int64_t weights = 0;       // f32 master weights (ZeRO-3: its shard and the unit slots)
  int64_t grads = 0;         // f32 gradients (one micro-batch)
  int64_t bf16_weights = 0;  // the bf16 copy (bf16 precision)
  int64_t adam = 0;          // AdamW m and v (this rank's shard)
  int64_t accumulation = 0;  // the gradient sum (and ZeRO-2/3's unit grad slots)
  int64_t total() const { return weights + grads + bf16_weights + adam + accumulation; }
};

class Trainer {
 public:
  // Reads the model/train/optim keys of `config` (unknown keys are errors),
  // opens the data, builds the model and optimizer, and either initialises
  // the weights or (options.resume) loads the latest checkpoint of run_dir.
  // Writes run_dir/config.toml.
  static Result<std::unique_ptr<Trainer>> Create(Config config, const RunOptions& options);
  ~Trainer();

  // One optimizer step (train.grad_accum micro-batches).
  StepMetrics Step();
  // Mean loss over the validation batches (deterministic: the first
  // train.eval_batches windows in order).
  EvalMetrics Evaluate();
  // Writes a checkpoint of the current state; returns its folder.
  Result<std::string> SaveCheckpoint();

  // Steps until train.steps, a stop request or the time limit; validation
  // and checkpoints as configured; always a checkpoint at the end.
  Result<RunSummary> Run(const Hooks& hooks);

  int64_t step() const { return step_; }
  const TrainConfig& train_config() const { return train_; }
  const model::ModelConfig& model_config() const { return model_config_; }
  // Every key read, with the value the run uses (saved as config.toml).
  std::string resolved_config() const { return config_.ResolvedToml(); }
  model::Llama& model() { return *model_; }
  const optim::AdamW& optimizer() const { return *optimizer_; }
  double peak_gflops() const { return peak_gflops_; }
  // Bytes of model, activations and optimizer state (checked against the
  // machine's available memory before anything was allocated).
  int64_t memory_estimate() const { return memory_estimate_; }
  // The kernels this run's bits depend on (KernelCtx::BitsName), and, after
  // a resume whose checkpoint ran on others, what that means (else empty).
  std::string kernels() const;
  const std::string& resume_note() const { return resume_note_; }
  StateMemory state_memory() const;
  int threads() const { return pool_->size(); }
  // This process's rank and the job's ranks (0 and 1 alone).
  int rank() const { return world_->rank(); }
  int world_size() const { return world_->size(); }
  int dp_size() const { return plan_->dp().size(); }
  // The optimizer state (and under ZeRO-1/2 the weights' update) is split
  // over the data-parallel ranks: the same answer on every rank.
  bool sharded() const { return plan_->zero() >= 1 && dp_size() > 1; }
  const parallel::ParallelConfig& parallel_config() const { return plan_->config(); }

 private:
  Trainer() = default;
  Status Init(Config config, const RunOptions& options);
  Status Build();
  model::StepHooks MakeStepHooks();
  Status LoadCheckpoint(const std::string& path);
  // Rank 0's files of a checkpoint: the whole weights (unless the ranks
  // wrote shards), trainer state, configs.
  Status WriteSharedCheckpointFiles(const std::string& temp_dir);
  std::string CheckpointIndexJson() const;  // checkpoint_index.json
  // The first tensor, in backward order, whose reduced gradient (this rank's
  // `grads`, agreed over the ranks) holds an infinity or a NaN.
  std::string NonFiniteTensor(std::span<const float> grads);
  // Every rank learns whether any failed: a rank that did not fail gets an
  // error saying another did (its own message is on its stderr). With one
  // process, `status` itself.
  Status Agree(Status status, const char* what);
  bool root() const { return world_->rank() == 0; }
  // A measurement of the step time that train.steps is fitted from.
  struct StepTiming {
    double step_seconds = 0;       // mean seconds of one optimizer step
    int64_t first_step = 0;        // over steps [first_step, step_]
    int64_t configured_steps = 0;  // the most the fit may keep
    // A check of an earlier fit: train.steps moves only by more than
    // BudgetRefit::kMinChange.
    bool refit = false;
  };
  // Fits train.steps to the time budget (time_budget.h) from the measured
  // step time; rewrites the run's config.toml with the steps chosen.
  Status PlanToTimeBudget(const StepTiming& timing, double elapsed_seconds, const Hooks& hooks);
  profile::PeakFlops MeasurePeak() const;  // RunOptions::measure_peak's
  // The MFU denominator of this run's precision among the measured peaks.
  double PeakOfPrecision(const profile::PeakFlops& peak) const;
  // A step with MFU over 1 outran the peak measured at startup: another
  // process held the cores while it was measured. Measures again (rank 0,
  // once a session), keeps the larger, corrects `m` and machine.json.
  void RecheckPeak(StepMetrics& m, const std::function<void(const std::string&)>& message);
  Status WriteMachine() const;  // run_dir/machine.json of machine_

  RunOptions options_;
  std::shared_ptr<comm::Group> world_;
  std::unique_ptr<parallel::ParallelPlan> plan_;  // degrees and groups
  TrainConfig train_;
  model::ModelConfig model_config_;
  optim::OptimConfig optim_config_;
  Config config_;  // every key read; re-resolved when the run settles train.steps
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<kernels::KernelCtx> ctx_;
  std::unique_ptr<data::TokenShard> train_shard_, val_shard_;
  // One per micro-batch of a step (slot micro * dp + rank of the global step).
  std::vector<std::unique_ptr<data::Loader>> loaders_;
  std::unique_ptr<data::Loader> val_loader_;
  std::unique_ptr<model::Llama> model_;
  std::unique_ptr<parallel::DataParallel> dp_;
  std::unique_ptr<parallel::WeightGather> gather_;  // ZeRO-3
  model::StepHooks hooks_;
  // The numerics probe (RunOptions::probe; rank 0 writes).
  std::unique_ptr<ProbeWriter> probe_;
  std::string probe_fault_name_;
  float probe_fault_factor_ = 1.0f;
  // Records the parameter grads (this rank's reduced ones, when whole) and
  // the updated weights of a probed step, continuing its execution order.
  void ProbeParams(std::span<const float> grads, int64_t& index);
  std::unique_ptr<optim::AdamW> optimizer_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  std::unique_ptr<MetricsWriter> metrics_;
  double peak_gflops_ = 0;
  bool peak_rechecked_ = false;
  std::string peak_note_;  // machine.json's peak_source after RecheckPeak
  std::string started_at_;
  double flops_per_token_ = 0;
  int64_t memory_estimate_ = 0;
  std::string resume_note_;

  int64_t step_ = 0;          // optimizer steps done
  int64_t tokens_seen_ = 0;   // training tokens consumed
  int64_t last_saved_step_ = -1;
  bool schedule_planned_ = false;  // train.steps fitted to the time budget
  int64_t last_eval_step_ = -1;
  std::optional<double> last_val_loss_;

  // Model-format copies of the micro-batches of one step.
  struct Micro {
    std::vector<int32_t> tokens, targets, positions, cu_seqlens;
    model::Batch view;
  };
  std::vector<Micro> micro_;
  Micro eval_batch_;
  data::Batch eval_scratch_;
};

}  // namespace anvil::train
