// The trainer: setup from a Config, the step with gradient accumulation,
// validation, and the run loop (see trainer.h). Checkpoint save/load is in
// checkpointing.cc.
#include "anvil/train/trainer.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "anvil/comm/world.h"
#include "anvil/core/clock.h"
#include "anvil/core/file_util.h"
#include "anvil/io/checkpoint.h"
#include "anvil/kernels/attention.h"
#include "anvil/model/attention_block.h"
#include "anvil/model/head_block.h"
#include "anvil/parallel/plan.h"
#include "anvil/parallel/weight_gather.h"
#include "anvil/profile/machine.h"
#include "anvil/profile/peak.h"
#include "anvil/profile/trace.h"
#include "anvil/train/report_machine.h"
#include "anvil/train/time_budget.h"
#include "anvil/train/trace_merge.h"

namespace anvil::train {
namespace {

// Copies a loader batch ([B, T+1] windows) into model-format arrays.
int64_t ToModelBatch(const data::Batch& b, bool packed, std::vector<int32_t>& tokens,
                     std::vector<int32_t>& targets, std::vector<int32_t>& positions,
                     std::vector<int32_t>& cu_seqlens, model::Batch& view) {
  const size_t n = static_cast<size_t>(b.batch_size) * b.seq_len;
  tokens.resize(n);
  targets.resize(n);
  int64_t counted = 0;
  for (int r = 0; r < b.batch_size; ++r) {
    const auto in = b.Inputs(r);
    const auto tg = b.Targets(r);
    std::copy(in.begin(), in.end(), tokens.begin() + static_cast<size_t>(r) * b.seq_len);
    std::copy(tg.begin(), tg.end(), targets.begin() + static_cast<size_t>(r) * b.seq_len);
  }
  for (int32_t t : targets) counted += t != model::kIgnoreIndex;
  if (packed) {
    positions = b.positions;
    cu_seqlens = b.cu_seqlens;
  } else {
    positions.clear();
    cu_seqlens.clear();
  }
  view = model::Batch{.rows = b.batch_size, .seq_len = b.seq_len, .tokens = tokens,
                      .targets = targets, .cu_seqlens = cu_seqlens, .positions = positions};
  return counted;
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The bytes the run will hold: the model (weights, grads, bf16 shadow,
// activations) and AdamW's two f32 moments per parameter. A run that cannot
// fit is refused before anything is allocated; otherwise it would die later
// in an allocation or by the OOM killer without saying why.
// Per rank: the model's buffers (whole weights and grads as the ZeRO stage
// keeps them) and activations, AdamW's state (sharded from ZeRO-1 over
// `shards` ranks), the f32 gradient sum (with several micro-batches or from
// ZeRO-2; sharded from ZeRO-1), ZeRO-2/3's two unit slots for grads and
// ZeRO-3's master shard and two unit slots for weights.
Result<int64_t> CheckMemory(const model::ModelConfig& mc, const model::LlamaOptions& mo,
                            int64_t grad_accum, int zero, int shards) {
  const model::LlamaMemory m = model::Llama::EstimateMemory(mc, mo);
  const int64_t p = m.param_elements, f = sizeof(float);
  const int64_t adam_bytes = p * 2 * f / shards;
  int64_t largest_unit = 0;  // the embedding or the head, or a layer
  const std::vector<int64_t> units = model::Llama::UnitBegins(mc);
  for (size_t u = 0; u + 1 < units.size(); ++u) largest_unit = std::max(largest_unit, units[u + 1] - units[u]);
  const bool bf16 = model::HoldsBf16Weights(mo.precision, mo.fp8);
  int64_t extra = (grad_accum > 1 || zero >= 2) ? p * f / (zero >= 1 ? shards : 1) : 0;
  if (zero >= 2) extra += 2 * largest_unit * f;
  // ZeRO-3 also holds whole f32 weights for a moment: on rank 0 at each
  // checkpoint, on every rank when it resumes.
  if (zero == 3) extra += p * f / shards + 2 * largest_unit * (f + (bf16 ? 2 : 0)) + p * f;
  const int64_t need = m.total() + adam_bytes + extra;
  const long available = profile::AvailableMemoryBytes();
  if (available >= 0 && need > available) {
    return ResourceExhausted(fmt::format(
        "the run needs about {:.1f} GiB (weights, grads and bf16 copy {:.1f}, AdamW state {:.1f}, "
        "activations of {} x {} tokens {:.1f}, sums and gather buffers {:.1f}) but this machine "
        "has {:.1f} GiB available: make "
        "the model smaller (model.dim, model.n_layers, model.ffn_dim, model.vocab_size) or the "
        "micro-batch (train.batch_size, train.seq_len; train.grad_accum keeps the step's tokens), "
        "or keep fewer activations (train.recompute = \"full\")",
        need / kGiB, m.params_bytes / kGiB, adam_bytes / kGiB, mo.max_batch, mo.max_seq_len,
        m.activation_bytes / kGiB, extra / kGiB, available / kGiB));
  }
  return need;
}

}  // namespace

Trainer::~Trainer() = default;

Result<std::unique_ptr<Trainer>> Trainer::Create(Config config, const RunOptions& options) {
  std::unique_ptr<Trainer> t(new Trainer());
  RETURN_IF_ERROR(t->Init(std::move(config), options));
  return t;
}

Status Trainer::Agree(Status status, const char* what) {
  return comm::AgreeOnStatus(*world_, status, what);
}

Status Trainer::Init(Config config, const RunOptions& options) {
  options_ = options;
  world_ = options.world ? options.world : comm::MakeLocalGroup("world");
  ASSIGN_OR_RETURN(model_config_, model::ModelConfig::FromConfig(config));
  ASSIGN_OR_RETURN(train_, TrainConfig::FromConfig(config));
  ASSIGN_OR_RETURN(optim_config_, optim::OptimConfig::FromConfig(config));
  ASSIGN_OR_RETURN(const parallel::ParallelConfig parallel, parallel::ParallelConfig::FromConfig(config));
  ASSIGN_OR_RETURN(parallel::ParallelPlan plan, parallel::ParallelPlan::Create(parallel, world_, config));
  plan_ = std::make_unique<parallel::ParallelPlan>(std::move(plan));
  RETURN_IF_ERROR(config.CheckAllUsed());
  config_ = std::move(config);
  // Up to the first collective (Agree below) every check is the same on
  // every rank (same config), so an error here is every rank's error.
  if (train_.seq_len > model_config_.max_seq_len) {
    return InvalidArgument(fmt::format("key train.seq_len = {} exceeds model.max_seq_len = {}",
                                       train_.seq_len, model_config_.max_seq_len));
  }
  const std::string& dir = options_.run_dir;
  if (dir.empty()) return InvalidArgument("no run folder given (--out)");
  // A run folder need not be shared (each host its own): every rank checks,
  // and all agree before anything is written.
  Status folder = Status::Ok();
  if (!options_.resume && std::filesystem::exists(dir + "/" + io::kLatestFile)) {
    folder = InvalidArgument(fmt::format(
        "{}: already holds a run with checkpoints; continue it with `anvil train --resume {}` "
        "or choose another --out",
        dir, dir));
  }
  if (folder.ok()) folder = MakeDirectories(dir);
  RETURN_IF_ERROR(Agree(std::move(folder), "creating the run folder"));

  pool_ = std::make_unique<ThreadPool>(static_cast<int>(train_.threads));
  const size_t scratch = std::max(kernels::KernelCtx::kDefaultScratchBytes,
                                  kernels::AttentionScratchBytes(model::AttentionDimsOf(model_config_)));
  ctx_ = std::make_unique<kernels::KernelCtx>(*pool_, BestIsa(), scratch);
  // The peaks are MFU's denominators, and "auto" precision picks the faster one.
  std::optional<profile::PeakFlops> peak;
  const bool fp8 = model::IsFp8(train_.precision);
  if (options_.peak_gflops <= 0 || train_.precision_auto ||
      (fp8 && (train_.fp8_decode_auto || train_.fp8_high_precision_auto))) {
    peak = MeasurePeak();
    // Rank 0's measurement for all: ranks must pick the same precision.
    double v[3] = {peak->f32_gflops, peak->bf16_gflops, peak->bf16_native ? 1.0 : 0.0};
    world_->Broadcast(std::span<double>(v), 0);
    peak->f32_gflops = v[0];
    peak->bf16_gflops = v[1];
    peak->bf16_native = v[2] != 0;
  }
  if (train_.precision_auto) {
    train_.precision = AutoPrecision(*peak);
    config_.Resolve("train.precision", std::string(model::PrecisionName(train_.precision)));
  }
  // FP8 values meet in the machine's faster dot product; the choice is
  // recorded, so a resume decodes as the run did.
  if (fp8 && train_.fp8_decode_auto) {
    const bool bf16_dot = AutoPrecision(*peak) == model::Precision::kBF16;
    train_.fp8_decode = bf16_dot ? kernels::Fp8Decode::kBf16 : kernels::Fp8Decode::kF32;
    config_.Resolve("train.fp8_decode",
                    std::string(train_.fp8_decode == kernels::Fp8Decode::kBf16 ? "bf16" : "f32"));
  }
  // What stays out of FP8 (the LM head, the kept layers) likewise: in bf16
  // where the machine's bf16 GEMMs are the faster. A run resumed from
  // before the key existed ran it in f32, and goes on so.
  if (fp8 && train_.fp8_high_precision_auto && options_.resume &&
      !config_.Has("train.fp8_high_precision")) {
    train_.fp8_high_precision_auto = false;
    config_.Resolve("train.fp8_high_precision", std::string("f32"));
  }
  if (fp8 && train_.fp8_high_precision_auto) {
    train_.fp8_high_precision_bf16 = AutoPrecision(*peak) == model::Precision::kBF16;
    config_.Resolve("train.fp8_high_precision", std::string(train_.fp8_high_precision_name()));
  }
  peak_gflops_ = options_.peak_gflops > 0 ? options_.peak_gflops : PeakOfPrecision(*peak);
  RETURN_IF_ERROR(Agree(Build(), "setting up the run"));
  if (options_.resume) RETURN_IF_ERROR(Agree(LoadCheckpoint(dir), "loading the checkpoint"));
  micro_.resize(train_.grad_accum);
  if (!root()) return Agree(Status::Ok(), "starting the run");
  // Only now, with the run accepted: a refused resume (other data or
  // precision given with --set) must not overwrite the config that
  // `anvil train --resume` reads back.
  started_at_ = UtcNow();
  Status written = WriteFileAtomic(dir + "/config.toml", resolved_config());
  if (written.ok()) written = WriteMachine();
  if (written.ok() && options_.probe && root()) {
    probe_ = std::make_unique<ProbeWriter>();
    written = probe_->Open(dir + "/probe.jsonl");
  }
  if (written.ok() && options_.write_metrics) {
    auto metrics = MetricsWriter::Open(dir + "/metrics.jsonl", step_);
    if (metrics.ok()) {
      metrics_ = std::move(*metrics);
    } else {
      written = metrics.status();
    }
  }
  return Agree(std::move(written), "starting the run");
}

// The model, data and optimizer of this rank (no collectives: Init agrees
// on the outcome).
Status Trainer::Build() {
  const int zero = plan_->zero();
  const model::ParamBuffers buffers{.weights = zero < 3, .grads = zero < 2};
  RETURN_IF_ERROR(model::CheckParamBuffers(model_config_, buffers)
                      .WithContext(fmt::format("parallel.zero = {}", zero)));
  const model::LlamaOptions mo{
      .precision = train_.precision,
      .recompute = train_.recompute,
      .max_batch = train_.batch_size,
      .max_seq_len = train_.seq_len,
      .buffers = buffers,
      .fp8 = {.grad = train_.fp8_grad_format,
              .mx_rule = train_.fp8_mx_round_up ? kernels::BlockScale::kMxRoundUp
                                                : kernels::BlockScale::kMxOcp,
              .decode = train_.fp8_decode,
              .amax_history = static_cast<int>(train_.fp8_amax_history),
              .amax_most_recent = train_.fp8_amax_most_recent,
              .high_precision_bf16 = train_.fp8_high_precision_bf16},
      .fp8_high_precision_layers = static_cast<int>(train_.fp8_high_precision_layers)};
  ASSIGN_OR_RETURN(memory_estimate_,
                   CheckMemory(model_config_, mo, train_.grad_accum, zero, dp_size()));

  auto open = [&](const char* name) -> Result<std::unique_ptr<data::TokenShard>> {
    const std::string path = train_.data_dir + "/" + name;
    auto shard = data::TokenShard::Open(path);
    if (!shard.ok()) {
      return shard.status().WithContext(fmt::format(
          "opening the {} shard (data.dir = \"{}\"; run `anvil prepare` first)", name, train_.data_dir));
    }
    if (shard->vocab_size() > model_config_.vocab_size) {
      return InvalidArgument(fmt::format("{}: vocabulary of {} tokens exceeds model.vocab_size = {}",
                                         path, shard->vocab_size(), model_config_.vocab_size));
    }
    return std::make_unique<data::TokenShard>(std::move(*shard));
  };
  ASSIGN_OR_RETURN(train_shard_, open("train.bin"));
  ASSIGN_OR_RETURN(val_shard_, open("val.bin"));
  // A global step has dp x grad_accum slots of batch_size rows; this rank's
  // micro-batch i is slot i * dp + rank.
  const int dp = dp_size();
  const int slots = static_cast<int>(train_.grad_accum) * dp;
  data::LoaderConfig lc{.batch_size = static_cast<int>(train_.batch_size),
                        .seq_len = static_cast<int>(train_.seq_len),
                        .mode = train_.mode,
                        .shuffle = train_.shuffle,
                        .seed = static_cast<uint64_t>(train_.seed),
                        .rank = 0,
                        .world_size = slots};
  RETURN_IF_ERROR(lc.Validate());
  for (int i = 0; i < train_.grad_accum; ++i) {
    lc.rank = i * dp + plan_->dp().rank();
    auto loader = data::Loader::Create(*train_shard_, lc);
    if (!loader.ok()) return loader.status().WithContext("training data");
    loaders_.push_back(std::make_unique<data::Loader>(std::move(*loader)));
  }
  // Validation: the first eval_batches windows of one rank's shape, in order;
  // ranks take turns (batch i on rank i mod dp).
  lc.rank = 0;
  lc.world_size = 1;
  auto val_loader = data::Loader::Create(*val_shard_, lc.ForValidation());
  if (!val_loader.ok()) return val_loader.status().WithContext("validation data");
  val_loader_ = std::make_unique<data::Loader>(std::move(*val_loader));

  model_ = std::make_unique<model::Llama>(model_config_, mo, *ctx_);
  std::vector<int64_t> tensor_begins;
  for (const model::ParamInfo& p : model_->params().params()) tensor_begins.push_back(p.offset);
  const std::vector<int64_t> unit_begins = model::Llama::UnitBegins(model_config_);
  const parallel::ParallelConfig& parallel = plan_->config();
  dp_ = std::make_unique<parallel::DataParallel>(
      plan_->dp(), *pool_,
      parallel::DataParallelOptions{
          .zero = plan_->zero(),
          .bucket_elements = std::max<int64_t>(1, static_cast<int64_t>(parallel.bucket_mb * 1024 * 1024 / 4)),
          .overlap = parallel.overlap,
          .grad_accum = train_.grad_accum},
      model_->params().size(), model_->params().grads(), tensor_begins, unit_begins);
  if (zero == 3) {
    gather_ = std::make_unique<parallel::WeightGather>(
        plan_->dp(), *pool_, ctx_->isa(), unit_begins, dp_->shard_counts(),
        model::HoldsBf16Weights(train_.precision, model_->options().fp8));
  }
  optimizer_ = std::make_unique<optim::AdamW>(optim_config_, optim::LlamaParamGroups(model_->params()),
                                              model_->params().size(), dp_->shard());
  schedule_ = std::make_unique<optim::LrSchedule>(optim_config_, train_.steps);
  flops_per_token_ = model_config_.FlopsPerToken(train_.seq_len);
  hooks_ = MakeStepHooks();
  if (options_.probe && train_.probe_steps == 0) {
    return InvalidArgument("--probe with train.probe_steps = 0 would record nothing: set it >= 1");
  }
  if (!options_.probe_fault.empty()) {
    if (!options_.probe) {
      return InvalidArgument("--probe-fault plants a fault for the probe to find: add --probe");
    }
    ASSIGN_OR_RETURN(const ProbeFault fault,
                     ParseProbeFault(options_.probe_fault, model_config_.n_layers));
    probe_fault_name_ = fault.name;
    probe_fault_factor_ = fault.factor;
  }

  // Init always (it also zeroes the layout's padding); a resume then loads.
  // ZeRO-3 initialises its shard alone, to the same values.
  if (gather_) {
    const optim::Shard& sh = gather_->shard();
    model_->params().InitRange(*ctx_, static_cast<uint64_t>(train_.seed), sh.begin, sh.end,
                               gather_->master().data());
  } else {
    model_->InitWeights(*ctx_, static_cast<uint64_t>(train_.seed));
  }
  return Status::Ok();
}

profile::PeakFlops Trainer::MeasurePeak() const {
  return options_.measure_peak ? options_.measure_peak(*pool_) : profile::MeasurePeakFlops(*pool_);
}

double Trainer::PeakOfPrecision(const profile::PeakFlops& peak) const {
  const bool bf16_dot = train_.fp8_decode == kernels::Fp8Decode::kBf16;
  const bool bf16_peak =
      train_.precision == model::Precision::kBF16 || (model::IsFp8(train_.precision) && bf16_dot);
  return bf16_peak ? peak.bf16_gflops : peak.f32_gflops;
}

// What the run's throughput and MFU mean depends on this; `anvil report` shows it.
Status Trainer::WriteMachine() const {
  return WriteMachineJson(options_.run_dir + "/machine.json",
                          RunMachine{.threads = pool_->size(),
                                     .isa = IsaName(ctx_->isa()),
                                     .precision = model::PrecisionName(train_.precision),
                                     .peak_gflops = peak_gflops_,
                                     .peak_measured = options_.peak_gflops <= 0,
                                     .peak_note = peak_note_,
                                     .started_at = started_at_});
}

// Seen on a shared Zen 3: 121 of its 205 GFLOP/s at startup, and the steps
// then read 125-138% MFU. Every rank sees the same MFU (the step time is
// agreed), so all enter the broadcast.
void Trainer::RecheckPeak(StepMetrics& m, const std::function<void(const std::string&)>& message) {
  if (m.mfu <= 1.0 || options_.peak_gflops > 0 || peak_rechecked_) return;
  peak_rechecked_ = true;
  double again = 0;
  if (root()) {
    again = PeakOfPrecision(MeasurePeak());
  }
  world_->Broadcast(std::span<double>(&again, 1), 0);
  const double before = peak_gflops_, outran = m.mfu;
  if (again <= before) {
    message(fmt::format(
        "step {} ran at {:.0f}% of the measured peak ({:.1f} GFLOP/s); measured again: {:.1f}, "
        "kept (MFU above 100% then says the FLOP count is above what the step ran)",
        m.step, 100 * outran, before, again));
    return;
  }
  peak_gflops_ = again;
  m.mfu *= before / peak_gflops_;
  message(fmt::format(
      "step {} ran at {:.0f}% of the peak measured at startup ({:.1f} GFLOP/s), which another "
      "process must have slowed; measured again: {:.1f} GFLOP/s, the MFU from here on",
      m.step, 100 * outran, before, again));
  peak_note_ = fmt::format("measured again at step {} (startup: {:.1f})", m.step, before);
  if (root()) {
    const Status written = WriteMachine();
    if (!written.ok()) message(fmt::format("machine.json not rewritten: {}", written.ToString()));
  }
}

// How the model's units meet data parallelism: every stage reduces grads as
// the backward ends them; ZeRO-2/3 give each unit's backward a slot for its
// grads; ZeRO-3 gathers each unit's weights before it runs, prefetching the
// next (the embedding's backward reads no weights).
model::StepHooks Trainer::MakeStepHooks() {
  model::StepHooks h;
  h.grads_ready = [this](int64_t from) { dp_->OnGradsReady(from); };
  const int head = model_->num_units() - 1;
  if (gather_) {
    h.before_forward = [this, head](int unit) {
      const auto w = gather_->Acquire(unit, unit < head ? unit + 1 : -1);
      model_->BindUnitWeights(unit, w.f32, w.bf16);
    };
  }
  if (plan_->zero() >= 2) {
    h.before_backward = [this](int unit) {
      if (gather_ && unit > 0) {
        const auto w = gather_->Acquire(unit, unit > 1 ? unit - 1 : -1);
        model_->BindUnitWeights(unit, w.f32, w.bf16);
      }
      model_->BindUnitGrads(unit, dp_->BeginUnitBackward(unit));
    };
  }
  return h;
}

StateMemory Trainer::state_memory() const {
  const model::LlamaParams& p = model_->params();
  StateMemory m;
  m.params = p.size();
  m.weights = static_cast<int64_t>(p.weights().size_bytes()) + (gather_ ? gather_->allocated_bytes() : 0);
  m.grads = static_cast<int64_t>(p.grads().size_bytes());
  m.bf16_weights = static_cast<int64_t>(p.bf16().size_bytes());
  m.adam = optimizer_->shard().size() * static_cast<int64_t>(2 * sizeof(float));
  m.accumulation = dp_->allocated_bytes();
  return m;
}

StepMetrics Trainer::Step() {
  ANVIL_TRACE_ZONE("step");
  comm::SetDiagnosticStep(step_ + 1);
  if (gather_) gather_->TakeWaitSeconds();  // waits of earlier evaluation are not this step's
  const Stopwatch watch;
  const bool packed = train_.mode == data::BatchMode::kPacked;
  comm::Group& dp = plan_->dp();
  const int accum = static_cast<int>(train_.grad_accum), ranks = dp.size();
  int64_t counted = 0;
  {
    ANVIL_TRACE_ZONE("load_batches");
    for (int i = 0; i < accum; ++i) {
      Micro& m = micro_[i];
      counted += ToModelBatch(loaders_[i]->Next(), packed, m.tokens, m.targets, m.positions,
                              m.cu_seqlens, m.view);
    }
  }
  // The loss is the mean over the global step's counted targets.
  counted = dp.AllReduceValue<int64_t>(counted);
  const float loss_scale = counted > 0 ? static_cast<float>(1.0 / static_cast<double>(counted)) : 0.0f;
  std::vector<double> loss_sums(accum);
  // The numerics probe: the residual stream's values and grads as the step
  // makes them (and a planted fault, on every rank, when testing it).
  const bool probing = (probe_ || !probe_fault_name_.empty()) && step_ < train_.probe_steps;
  int64_t probe_index = 0;
  model::StepHooks probe_hooks;
  if (probing) {
    probe_hooks = hooks_;
    const bool fp8 = model::IsFp8(train_.precision);
    probe_hooks.probe = [&, fp8](const std::string& name, float* x, int64_t n) {
      if (name == probe_fault_name_) {
        for (int64_t i = 0; i < n; ++i) x[i] *= probe_fault_factor_;
      }
      if (!probe_) return;
      const bool grad = name.size() > 5 && name.compare(name.size() - 5, 5, ".d_in") == 0;
      probe_->Write({.step = step_ + 1, .index = probe_index++, .name = name,
                     .kind = grad ? "activation_grad" : "activation",
                     .stats = ComputeProbeStats({x, static_cast<size_t>(n)}, fp8)});
    };
  }
  const model::StepHooks& hooks = probing ? probe_hooks : hooks_;
  model::Fp8DelayedScaling* delayed = model_->fp8_delayed();
  if (delayed != nullptr) delayed->BeginStep();  // the micro-batches record their amaxes
  for (int i = 0; i < accum; ++i) {
    dp_->BeginMicroBatch(i);  // waits for reductions still reading the grads
    {
      ANVIL_TRACE_ZONE("zero_grads");
      model_->ZeroGrads(*ctx_);
    }
    ANVIL_TRACE_ZONE("forward_backward");
    loss_sums[i] = model_->ForwardBackward(*ctx_, micro_[i].view, loss_scale, hooks).loss_sum;
  }
  const std::span<const float> grads = dp_->FinishReduction();
  if (delayed != nullptr) {
    // Every rank's amaxes, so the scales stay equal across ranks (a NaN
    // passed as +inf: the max keeps it, and EndStep skips it).
    std::span<float> amax = delayed->step_amax();
    for (float& a : amax) a = std::isnan(a) ? std::numeric_limits<float>::infinity() : a;
    if (ranks > 1) dp.AllReduce(amax, comm::ReduceOp::kMax);
    delayed->EndStep();
  }
  // Every slot's loss sum, added in slot order (micro-batch i of rank r is
  // slot i * dp + r): the same bits for any layout of the same global batch.
  std::vector<double> all_sums(static_cast<size_t>(accum) * ranks);
  const std::vector<int64_t> per_rank(ranks, accum);
  dp.AllGather(std::span<const double>(loss_sums), std::span<double>(all_sums),
                    std::span<const int64_t>(per_rank));
  double loss_sum = 0;
  for (int i = 0; i < accum; ++i) {
    for (int r = 0; r < ranks; ++r) loss_sum += all_sums[static_cast<size_t>(r) * accum + i];
  }
  model::LlamaParams& params = model_->params();
  double norm = 0;
  {
    ANVIL_TRACE_ZONE("grad_norm");
    norm = dp_->GradNorm(grads);
  }
  const double lr = schedule_->LrAt(step_);
  // A gradient with an infinity or a NaN (the norm is global, so every rank
  // sees it): the weights and AdamW's state keep their values.
  const std::string nonfinite = std::isfinite(norm) ? std::string() : NonFiniteTensor(grads);
  if (nonfinite.empty()) {
    {
      ANVIL_TRACE_ZONE("adamw");
      // ZeRO-3 updates its master shard; the others the whole weights' shard.
      optimizer_->Step(*ctx_, lr, optim::ClipScale(norm, optim_config_.grad_clip),
                       gather_ ? gather_->master() : params.weights(), grads, params.bf16());
    }
    if (gather_) {
      gather_->Invalidate();  // the gathered units are stale now
    } else if (sharded()) {  // ZeRO-1/2: the other ranks' shards
      dp_->GatherWeights(params.weights());
      if (params.has_bf16()) model_->RefreshBf16Weights(*ctx_);
    }
  }
  if (probing && probe_) ProbeParams(grads, probe_index);
  ++step_;
  const int64_t tokens = train_.tokens_per_step() * ranks;  // every data-parallel rank's
  tokens_seen_ += tokens;
  StepMetrics m;
  m.step = step_;
  m.loss = counted > 0 ? loss_sum / static_cast<double>(counted) : 0.0;
  m.lr = lr;
  m.grad_norm = norm;
  m.nonfinite_tensor = nonfinite;
  m.seconds = watch.Seconds();
  // The step of the job is the slowest rank's (and every rank must see the
  // same time: the time budget plans from it).
  if (world_size() > 1) m.seconds = world_->AllReduceValue(m.seconds, comm::ReduceOp::kMax);
  m.tokens_per_s = static_cast<double>(tokens) / std::max(m.seconds, 1e-9);
  m.mfu = m.tokens_per_s * flops_per_token_ / (peak_gflops_ * 1e9 * ranks);
  m.mem_high_water = PeakRssBytes();
  m.tokens = tokens_seen_;
  // Reductions and weight gathers the compute did not hide (ZeRO-3's gathers
  // counted from this step's start: evaluation gathers too).
  if (ranks > 1) m.exposed_comm_s = dp_->exposed_comm_seconds() + (gather_ ? gather_->TakeWaitSeconds() : 0.0);
  return m;
}

void Trainer::ProbeParams(std::span<const float> grads, int64_t& index) {
  const model::LlamaParams& params = model_->params();
  const bool fp8 = model::IsFp8(train_.precision);
  // Reduced whole only without ZeRO (ZeRO-1 may hand back the whole buffer
  // with this rank's shard reduced in it).
  const bool whole_grads = plan_->zero() == 0 && static_cast<int64_t>(grads.size()) == params.size();
  for (const model::ParamInfo& p : params.params()) {
    if (!whole_grads) break;  // a ZeRO shard: this rank holds part of each
    probe_->Write({.step = step_ + 1, .index = index++, .name = p.name, .kind = "param_grad",
                   .stats = ComputeProbeStats(grads.subspan(p.offset, p.numel), fp8)});
  }
  if (!params.has_weights()) return;  // ZeRO-3 holds no whole weights
  for (const model::ParamInfo& p : params.params()) {
    probe_->Write({.step = step_ + 1, .index = index++, .name = p.name, .kind = "weight",
                   .stats = ComputeProbeStats(params.weights().subspan(p.offset, p.numel), fp8)});
  }
}

std::string Trainer::NonFiniteTensor(std::span<const float> grads) {
  // This rank's reduced grads are the whole layout or its shard of it.
  const model::LlamaParams& params = model_->params();
  const int64_t begin = static_cast<int64_t>(grads.size()) == params.size() ? 0 : dp_->shard().begin;
  const int64_t end = begin + static_cast<int64_t>(grads.size());
  const std::vector<model::ParamInfo>& tensors = params.params();
  // The last tensor in layout order is the first in backward order.
  int64_t found = -1;
  for (int64_t t = static_cast<int64_t>(tensors.size()) - 1; t >= 0 && found < 0; --t) {
    const model::ParamInfo& p = tensors[t];
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
    for (int64_t i = lo; i < hi; ++i) {
      if (!std::isfinite(grads[i - begin])) {
        found = t;
        break;
      }
    }
  }
  if (world_size() > 1) found = plan_->dp().AllReduceValue(found, comm::ReduceOp::kMax);
  return found >= 0 ? tensors[found].name : std::string("(the loss)");
}

EvalMetrics Trainer::Evaluate() {
  ANVIL_TRACE_ZONE("evaluate");
  const Stopwatch watch;
  const bool packed = train_.mode == data::BatchMode::kPacked;
  const int64_t batches =
      std::min<int64_t>(train_.eval_batches, static_cast<int64_t>(val_loader_->steps_per_epoch()));
  comm::Group& dp = plan_->dp();
  const int ranks = dp.size(), me = dp.rank();
  // Batch i on rank i mod dp; the sums are then added in batch order.
  std::vector<double> sums;
  std::vector<int64_t> counts;
  Micro& e = eval_batch_;
  // Under ZeRO-3 a forward gathers weights with every rank, so a rank with no
  // batch left in the last round runs one anyway (batch 0) and drops it.
  const int64_t rounds = (batches + ranks - 1) / ranks;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t i = round * ranks + me;
    if (i >= batches && !gather_) break;
    val_loader_->Fill({0, static_cast<uint64_t>(i < batches ? i : 0)}, &eval_scratch_);
    ToModelBatch(eval_scratch_, packed, e.tokens, e.targets, e.positions, e.cu_seqlens, e.view);
    const model::LossStats s = model_->Forward(*ctx_, e.view, {.before_forward = hooks_.before_forward});
    if (i >= batches) continue;
    sums.push_back(s.loss_sum);
    counts.push_back(s.tokens);
  }
  std::vector<int64_t> per_rank(ranks);
  for (int r = 0; r < ranks; ++r) per_rank[r] = (batches - r + ranks - 1) / ranks;
  std::vector<double> all_sums(batches);
  std::vector<int64_t> all_counts(batches);
  dp.AllGather(std::span<const double>(sums), std::span<double>(all_sums),
                    std::span<const int64_t>(per_rank));
  dp.AllGather(std::span<const int64_t>(counts), std::span<int64_t>(all_counts),
                    std::span<const int64_t>(per_rank));
  double loss_sum = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i < batches; ++i) {
    // Rank r's j-th batch is batch j * dp + r; gathered at offset(r) + j.
    const int64_t r = i % ranks, j = i / ranks;
    int64_t at = j;
    for (int64_t q = 0; q < r; ++q) at += per_rank[q];
    loss_sum += all_sums[at];
    tokens += all_counts[at];
  }
  EvalMetrics m;
  m.step = step_;
  m.val_loss = tokens > 0 ? loss_sum / static_cast<double>(tokens) : 0.0;
  m.val_tokens = tokens;
  m.seconds = watch.Seconds();
  last_eval_step_ = step_;
  last_val_loss_ = m.val_loss;
  return m;
}

Result<RunSummary> Trainer::Run(const Hooks& hooks) {
  RunSummary summary;
  summary.first_step = step_;
  const Stopwatch session;
  auto message = [&](const std::string& text) {
    if (hooks.on_message) hooks.on_message(text);
  };
  auto eval = [&] {
    const EvalMetrics e = Evaluate();
    if (metrics_) metrics_->Write(e);
    if (hooks.on_eval) hooks.on_eval(e);
  };
  auto save = [&]() -> Status {
    ASSIGN_OR_RETURN(summary.checkpoint, SaveCheckpoint());
    message(fmt::format("checkpoint {}", summary.checkpoint));
    return Status::Ok();
  };

  // With tracing: a few steps after the first (warm-up) step of this session.
  const int64_t remaining = train_.steps - step_;
  const int64_t trace_begin = step_ + (remaining > train_.trace_steps ? 1 : 0);
  const int64_t trace_end = std::min(train_.steps, trace_begin + train_.trace_steps);
  bool tracing = false;
  auto finish_trace = [&]() -> Status {
    profile::Tracer::Stop();
    tracing = false;
    const std::string path = options_.run_dir + "/trace.json";
    if (world_size() == 1) {
      RETURN_IF_ERROR(profile::Tracer::WriteChromeJson(path));
    } else {  // a file per rank, merged by rank 0: one process per rank
      const std::string mine = fmt::format("{}/trace.rank{}.json", options_.run_dir, rank());
      RETURN_IF_ERROR(Agree(profile::Tracer::WriteChromeJson(mine, rank(), fmt::format("rank {}", rank())),
                            "writing the trace"));
      RETURN_IF_ERROR(Agree(root() ? MergeRankTraces(options_.run_dir, world_size(), path) : Status::Ok(),
                            "merging the trace"));
    }
    message(fmt::format("trace of steps {}..{} ({} events) in {}", trace_begin + 1, step_,
                        profile::Tracer::Events().size(), path));
    return Status::Ok();
  };

  // With a time budget: time this session's steps after its first (which
  // faults in pages and warms caches), then fit train.steps; with
  // train.time_budget_refit, check that fit again as the run goes (BudgetRefit).
  bool planning = train_.time_budget_minutes > 0 && !schedule_planned_;
  const int64_t session_first_step = step_;
  int64_t timed_steps = 0;
  double timed_seconds = 0;
  struct {
    int64_t at = -1;         // the step of the first fit (-1: no checks)
    int64_t first = 0;       // the steps it chose
    int64_t configured = 0;  // train.steps as configured: the most a check may keep
    double own = 0;          // this rank's session seconds at the fit
    // Seconds since in evaluations, checkpoints and the trace's writing: left
    // out of a check's step time (they fall unevenly into its window; the
    // plan counts them per period as the first fit does).
    double periodic = 0;
  } fit;

  while (step_ < train_.steps) {
    // Stop decisions are the job's: a rank that stopped alone would leave
    // the others waiting in the next step's collectives.
    int32_t stop = 0;
    if (hooks.stop_requested && hooks.stop_requested()) stop |= 1;
    if (train_.max_minutes > 0 && session.Seconds() > train_.max_minutes * 60) stop |= 2;
    if (world_->size() > 1) stop = world_->AllReduceValue(stop, comm::ReduceOp::kMax);
    if (stop & 1) {
      summary.interrupted = true;
      break;
    }
    if (stop & 2) {
      summary.time_limited = true;
      message(fmt::format("time limit train.max_minutes = {} reached at step {}", train_.max_minutes,
                          step_));
      break;
    }
    if (options_.trace && step_ == trace_begin) {
      if (world_size() > 1) world_->Barrier();  // the ranks' trace clocks start together
      profile::Tracer::Start();
      tracing = true;
    }
    StepMetrics m = Step();
    RecheckPeak(m, message);
    if (metrics_) metrics_->Write(m);
    if (!m.nonfinite_tensor.empty()) {
      const std::string what = fmt::format(
          "step {}: the gradient is not finite (grad norm {}; first in backward order: {})", step_,
          std::fabs(m.grad_norm), m.nonfinite_tensor);
      if (train_.stop_on_nonfinite) {
        return DataLoss(what + "; train.on_nonfinite = \"stop\" ends the run (\"skip\" would skip "
                               "such steps)");
      }
      message(what + "; the optimizer step was skipped");
    }
    if (hooks.on_step) hooks.on_step(m);
    if (planning && step_ > session_first_step + 1) {
      ++timed_steps;
      timed_seconds += m.seconds;
      if (BudgetTiming::Done(timed_steps, timed_seconds, step_, optim_config_.warmup_steps)) {
        // The slowest rank's clock, so every rank fits the same step count.
        const double elapsed = world_->AllReduceValue(session.Seconds(), comm::ReduceOp::kMax);
        const int64_t configured = train_.steps;
        RETURN_IF_ERROR(
            PlanToTimeBudget({.step_seconds = timed_seconds / static_cast<double>(timed_steps),
                              .first_step = step_ - timed_steps + 1,
                              .configured_steps = configured},
                             elapsed, hooks));
        planning = false;
        if (train_.time_budget_refit) fit = {step_, train_.steps, configured, session.Seconds(), 0};
      }
    } else if (fit.at >= 0 && BudgetRefit::Due(step_, fit.at, fit.first, train_.steps)) {
      // (train.steps and the step are the same on every rank: all check here)
      const double own = session.Seconds();
      const double elapsed = world_->AllReduceValue(own, comm::ReduceOp::kMax);
      const double stepping =
          world_->AllReduceValue(own - fit.own - fit.periodic, comm::ReduceOp::kMax);
      RETURN_IF_ERROR(
          PlanToTimeBudget({.step_seconds = stepping / static_cast<double>(step_ - fit.at),
                            .first_step = fit.at + 1,
                            .configured_steps = fit.configured,
                            .refit = true},
                           elapsed, hooks));
    }
    const Stopwatch periodic;
    if (tracing && step_ >= trace_end) RETURN_IF_ERROR(finish_trace());
    if (train_.eval_every > 0 && step_ % train_.eval_every == 0) eval();
    if (train_.checkpoint_every > 0 && step_ % train_.checkpoint_every == 0) RETURN_IF_ERROR(save());
    fit.periodic += periodic.Seconds();
  }
  if (tracing) RETURN_IF_ERROR(finish_trace());
  if (!summary.interrupted && last_eval_step_ != step_) eval();
  if (last_saved_step_ != step_) RETURN_IF_ERROR(save());
  if (summary.checkpoint.empty()) {
    summary.checkpoint = options_.run_dir + "/" + io::CheckpointDirName(step_);
  }
  summary.steps_done = step_;
  summary.final_val_loss = last_val_loss_;
  summary.seconds = session.Seconds();
  return summary;
}

Status Trainer::PlanToTimeBudget(const StepTiming& timing, double elapsed_seconds,
                                 const Hooks& hooks) {
  const double step_seconds = timing.step_seconds;
  // Estimates: a validation batch is one forward (about a third of a
  // micro-batch's forward + backward); a checkpoint writes the weights and
  // both Adam moments (12 bytes per parameter) at a conservative 300 MB/s.
  const int64_t eval_batches =
      std::min<int64_t>(train_.eval_batches, static_cast<int64_t>(val_loader_->steps_per_epoch()));
  const double eval_seconds = static_cast<double>(eval_batches) * step_seconds /
                              (3.0 * static_cast<double>(train_.grad_accum));
  const double checkpoint_seconds = static_cast<double>(model_->params().size()) * 12.0 / 300e6;
  const int64_t before = train_.steps;
  const BudgetPlan plan = PlanToBudget({.budget_seconds = train_.time_budget_minutes * 60,
                                        .elapsed_seconds = elapsed_seconds,
                                        .step = step_,
                                        .configured_steps = timing.configured_steps,
                                        .step_seconds = step_seconds,
                                        .eval_every = train_.eval_every,
                                        .eval_seconds = eval_seconds,
                                        .checkpoint_every = train_.checkpoint_every,
                                        .checkpoint_seconds = checkpoint_seconds});
  schedule_planned_ = true;
  if (timing.refit && !BudgetRefit::Moves(before, plan.steps)) return Status::Ok();
  const double tokens_per_s =
      static_cast<double>(train_.tokens_per_step() * dp_size()) / step_seconds;
  const std::string head =
      fmt::format("time budget {:g} min: {:.3f} s/step ({:.0f} tokens/s) over steps {}-{}{}",
                  train_.time_budget_minutes, step_seconds, tokens_per_s, timing.first_step, step_,
                  timing.refit ? " (evaluations and checkpoints aside), checked again" : "");
  // "about 3.2 min", or seconds for a run under a minute.
  const std::string expected = plan.expected_seconds < 60
                                   ? fmt::format("about {:.0f} s", plan.expected_seconds)
                                   : fmt::format("about {:.1f} min", plan.expected_seconds / 60);
  if (plan.steps == before) {
    if (hooks.on_message) {
      hooks.on_message(fmt::format("{}; all {} steps fit ({} in all)", head, before, expected));
    }
    return Status::Ok();
  }
  train_.steps = plan.steps;
  schedule_ = std::make_unique<optim::LrSchedule>(optim_config_, train_.steps);
  config_.Resolve("train.steps", Config::Value{train_.steps});
  RETURN_IF_ERROR(Agree(root() ? WriteFileAtomic(options_.run_dir + "/config.toml", resolved_config())
                               : Status::Ok(),
                        "saving the fitted schedule"));
  if (hooks.on_message) {
    hooks.on_message(fmt::format("{}; schedule {}: train.steps {} -> {}{}, {} in all", head,
                                 timing.refit ? "refitted" : "fitted", before, plan.steps,
                                 optim_config_.decay_steps == 0
                                     ? fmt::format(" (the cosine now ends at step {})", plan.steps)
                                     : std::string(),
                                 expected));
  }
  if (hooks.on_message && train_.steps < optim_config_.warmup_steps &&
      (!timing.refit || before >= optim_config_.warmup_steps)) {
    hooks.on_message(fmt::format(
        "warning: the budget fits {} steps, fewer than optim.warmup_steps = {}: the run ends "
        "inside the warmup, before any decay; give it more time or a shorter warmup",
        train_.steps, optim_config_.warmup_steps));
  }
  if (hooks.on_schedule) hooks.on_schedule(train_.steps);
  return Status::Ok();
}

}  // namespace anvil::train
