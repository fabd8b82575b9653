// Supervised fine-tuning on task problems (sft.h).
#include "anvil/rl/sft.h"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <span>
#include <vector>

#include "anvil/comm/world.h"
#include "anvil/core/clock.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/tokenizer_json.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/optim/adamw.h"
#include "anvil/profile/trace.h"
#include "anvil/rl/shared_outcome.h"
#include "anvil/rl/trainer_ranks.h"

namespace anvil::rl {
namespace {

// " model.key = asked (the checkpoint: value)" for each key that differs, with "; " between.
std::string ModelKeysDiffering(const model::ModelConfig& asked, const model::ModelConfig& ckpt) {
  std::string out;
  auto key = [&](const char* name, auto a, auto c) {
    if (a == c) return;
    out += fmt::format("{} model.{} = {} (the checkpoint: {})", out.empty() ? "" : ";", name, a, c);
  };
  key("dim", asked.dim, ckpt.dim);
  key("n_layers", asked.n_layers, ckpt.n_layers);
  key("n_heads", asked.n_heads, ckpt.n_heads);
  key("n_kv_heads", asked.n_kv_heads, ckpt.n_kv_heads);
  key("ffn_dim", asked.ffn_dim, ckpt.ffn_dim);
  key("vocab_size", asked.vocab_size, ckpt.vocab_size);
  key("max_seq_len", asked.max_seq_len, ckpt.max_seq_len);
  key("rope_theta", asked.rope_theta, ckpt.rope_theta);
  key("norm_eps", asked.norm_eps, ckpt.norm_eps);
  key("tie_embeddings", asked.tie_embeddings, ckpt.tie_embeddings);
  return out;
}

Result<data::Tokenizer> SftTokenizer(const std::string& name) {
  if (name == "bytes") return data::ByteTokenizer();
  if (name == "from sft.init") {  // as a run from sft.init records it
    return InvalidArgument("sft.tokenizer = \"from sft.init\" needs sft.init set");
  }
  return data::LoadTokenizer(name);
}

}  // namespace

Status FillSftBatch(const Policy& policy, const TaskConfig& task, int64_t first_problem,
                    int64_t rows, SftBatch& b) {
  const int64_t t_len = policy.config.max_seq_len;
  b.tokens.assign(rows * t_len, policy.eos());
  b.targets.assign(rows * t_len, model::kIgnoreIndex);
  b.counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const Problem p = MakeProblem(task, Split::kTrain, static_cast<uint64_t>(first_problem + r));
    std::vector<int32_t> seq = policy.PromptTokens(p.prompt);
    const int64_t prompt_len = static_cast<int64_t>(seq.size());
    const std::vector<int32_t> answer = policy.ResponseTokens(p.answer);
    seq.insert(seq.end(), answer.begin(), answer.end());
    const int64_t n = static_cast<int64_t>(seq.size()) - 1;  // positions with a next token
    if (n > t_len) {
      return InvalidArgument(fmt::format(
          "the problem \"{}\" and its answer take {} tokens; model.max_seq_len is {}", p.prompt,
          n + 1, t_len));
    }
    std::copy(seq.begin(), seq.begin() + n, b.tokens.begin() + r * t_len);
    for (int64_t t = prompt_len - 1; t < n; ++t) {
      b.targets[r * t_len + t] = seq[t + 1];
      ++b.counted;
    }
  }
  return Status::Ok();
}

Result<PostRunSummary> RunSft(Config config, const PostRunOptions& options,
                              const SftHooks& hooks) {
  // (every trainer rank returns from a failed setup: one outcome for all)
  SetupAgreement setup(options.trainers, options.failed_in_setup);
  ASSIGN_OR_RETURN(const int64_t batch_size, config.GetInt("sft.batch_size", 64));
  if (batch_size < 1 || batch_size > 65536) {
    return InvalidArgument(fmt::format("sft.batch_size = {}: expected 1..65536", batch_size));
  }
  ASSIGN_OR_RETURN(const std::string tokenizer, config.GetString("sft.tokenizer", "bytes"));
  ASSIGN_OR_RETURN(const double stop_at, config.GetDouble("sft.stop_at_accuracy", 0.0));
  ASSIGN_OR_RETURN(const int64_t grad_accum, config.GetInt("sft.grad_accum", 1));
  ASSIGN_OR_RETURN(const double comm_timeout_s, config.GetDouble("comm.timeout_s", 600));
  if (grad_accum < 1 || grad_accum > 1024) {
    return InvalidArgument(fmt::format(
        "sft.grad_accum = {}: expected 1..1024 micro-batches a rank and step", grad_accum));
  }
  if (!(comm_timeout_s > 0)) {
    return InvalidArgument(fmt::format("comm.timeout_s = {}: expected > 0", comm_timeout_s));
  }
  if (!(stop_at >= 0 && stop_at <= 1)) {
    return InvalidArgument(fmt::format("sft.stop_at_accuracy = {}: expected 0 (off) .. 1", stop_at));
  }
  const PostRun::FreshPolicy fresh = [&](Config& c, const PostRunConfig& run,
                                         const PolicyOptions& po) -> Result<Policy> {
    ASSIGN_OR_RETURN(const model::ModelConfig mc, model::ModelConfig::FromConfig(c));
    ASSIGN_OR_RETURN(data::Tokenizer tok, SftTokenizer(tokenizer));
    return NewPolicy(mc, std::move(tok), static_cast<uint64_t>(run.seed), po);
  };
  // The ranks training together, a step's rows cut into their slots
  // (trainer_ranks.h): a model holds one slot's rows.
  comm::Group* trainers = options.trainers;
  const int ranks = trainers != nullptr ? trainers->size() : 1;
  ASSIGN_OR_RETURN(std::unique_ptr<PostRun> run,
                   PostRun::Create(std::move(config), "sft", options,
                                   SlotRowsAtMost(batch_size, 1, ranks * grad_accum), fresh));
  Policy& policy = run->policy();
  if (!run->loaded_from().empty() && !options.resume) {
    // Started from sft.init: its checkpoint's tokenizer, whatever sft.tokenizer says.
    if (run->raw_config().Has("sft.tokenizer") && tokenizer != "from sft.init") {
      return InvalidArgument(fmt::format(
          "sft.tokenizer = \"{}\": the run starts from {} and keeps its tokenizer; drop "
          "sft.tokenizer (it names the tokenizer of a model made from scratch)",
          tokenizer, run->loaded_from()));
    }
    run->raw_config().Resolve("sft.tokenizer", std::string("from sft.init"));
  }
  if (!run->loaded_from().empty() && run->raw_config().Has("model.dim")) {
    // A [model] section beside a checkpoint (sft.init, or a resumed fresh
    // run) must describe it.
    ASSIGN_OR_RETURN(const model::ModelConfig mc, model::ModelConfig::FromConfig(run->raw_config()));
    if (model::HfConfigJson(mc) != model::HfConfigJson(policy.config)) {
      return InvalidArgument(fmt::format(
          "the [model] keys differ from the model of {}/config.json:{} (drop [model] to take the "
          "checkpoint's)",
          run->loaded_from(), ModelKeysDiffering(mc, policy.config)));
    }
  }
  const PostRunConfig& rc = run->config();
  if (stop_at > 0 && rc.eval_every == 0) {
    return InvalidArgument(
        "sft.stop_at_accuracy needs sft.eval_every > 0: it is checked at the evaluations");
  }
  RETURN_IF_ERROR(setup.Passed(run->Start()));
  const kernels::KernelCtx& ctx = *policy.ctx;
  model::Llama& model = *policy.llama;
  const int64_t t_len = policy.config.max_seq_len;
  std::unique_ptr<comm::Group> alone;
  if (trainers == nullptr) {
    alone = comm::MakeLocalGroup("trainer");
    trainers = alone.get();
  }
  if (ranks > 1) {
    comm::SetWatchdogTimeout(comm_timeout_s);
    RETURN_IF_ERROR(CheckSameKernels(*trainers, policy.Kernels()));
  }
  // fp8-delayed from a checkpoint without amax histories (or fresh): they
  // start from the first step's prompts, so anything decoding before the
  // first update (the end's evaluation of a run stopped by sft.max_minutes
  // before its first step) runs on fixed scales.
  {
    std::vector<std::vector<int32_t>> first;
    for (int64_t r = 0; r < batch_size && model.fp8_delayed() != nullptr; ++r) {
      const Problem p = MakeProblem(rc.task, Split::kTrain, static_cast<uint64_t>(r));
      first.push_back(policy.PromptTokens(p.prompt));
    }
    StartDelayedScales(model, ctx, first);
  }
  // A file of pairs is finite: each is checked to fit the context now, not
  // when its step comes (hours in, perhaps).
  if (const int64_t n = rc.task.SplitSize(Split::kTrain); n > 0) {
    SftBatch scratch;
    for (int64_t first = 0; first < n; first += batch_size) {
      RETURN_IF_ERROR(
          FillSftBatch(policy, rc.task, first, std::min(batch_size, n - first), scratch));
    }
    RETURN_IF_ERROR(CheckHeldOutFits(policy, rc.task, rc.eval_problems));
  }
  TrainerRanks slots(*trainers, static_cast<int>(grad_accum), run->zero_stage(), model, nullptr,
                     ctx.pool());
  parallel::DataParallel& dp = slots.policy_dp();
  model::StepHooks step_hooks;
  TrainerRanks::AddReduction(dp, model, step_hooks);
  if (hooks.on_start) hooks.on_start(rc, run->first_step());
  run->SetTrainerSlots(ranks, slots.grad_accum(), "step", hooks.run);
  // A checkpoint at an evaluation records its accuracy, and whether that met
  // sft.stop_at_accuracy (the run ends there: a resume finds it done).
  auto meets = [stop_at](const TaskEval& e) { return stop_at > 0 && e.accuracy >= stop_at; };
  run->SetEvaluationState([meets](const TaskEval& e) {
    return fmt::format("\"heldout_accuracy\": {}, \"stopped_at_accuracy\": {}", e.accuracy,
                       meets(e));
  });
  RETURN_IF_ERROR(run->MakeUpEvaluation(hooks.run));

  SftBatch batch;
  int64_t tokens_seen = run->step() * batch_size * t_len;
  // sft.stop_at_accuracy, met at the last evaluation (also a resumed run's:
  // it stopped there, and is done).
  auto met = [&] { return run->last_eval_step() == run->step() && meets(*run->last_eval()); };
  bool reached = met();
  if (reached && hooks.run.on_message) {
    hooks.run.on_message(fmt::format(
        "the run reached sft.stop_at_accuracy = {} at step {}: all done (raise it to go on)",
        stop_at, run->step()));
  }
  while (!reached && !run->Done(hooks.run)) {
    ANVIL_TRACE_ZONE("sft_step");
    Stopwatch watch;
    RETURN_IF_ERROR(FillSftBatch(policy, rc.task, run->step() * batch_size, batch_size, batch));
    // The mean over the whole step's answer tokens, whichever slot holds them.
    const float loss_scale =
        batch.counted > 0 ? static_cast<float>(1.0 / static_cast<double>(batch.counted)) : 0.0f;
    std::vector<double> loss_sums(static_cast<size_t>(slots.grad_accum()));
    TrainerRanks::BeginDelayedStep(model);  // fp8-delayed: the step records its amaxes
    for (int i = 0; i < slots.grad_accum(); ++i) {
      const auto [a, b] = slots.SlotRows(0, batch_size, i * slots.size() + slots.rank());
      TrainerRanks::BeginSlot(dp, i, model, ctx);
      if (a == b) {
        TrainerRanks::EmptySlot(dp, model);
        continue;
      }
      const model::Batch view{
          .rows = b - a,
          .seq_len = t_len,
          .tokens = std::span<const int32_t>(batch.tokens).subspan(a * t_len, (b - a) * t_len),
          .targets = std::span<const int32_t>(batch.targets).subspan(a * t_len, (b - a) * t_len)};
      loss_sums[i] = model.ForwardBackward(ctx, view, loss_scale, step_hooks).loss_sum;
    }
    const std::span<const float> grads = dp.FinishReduction();
    slots.EndDelayedStep(model);
    double loss_sum = 0;  // the slots' sums in slot order
    for (const double x : slots.AllSlots(loss_sums, 1)) loss_sum += x;
    model::LlamaParams& params = model.params();
    const double grad_norm = dp.GradNorm(grads);
    const double lr = run->LrAt(run->step());
    run->adamw().Step(ctx, lr, optim::ClipScale(grad_norm, rc.optim.grad_clip), params.weights(),
                      grads, params.bf16());
    slots.GatherWeights(dp, model, ctx);  // ZeRO-1/2: the other ranks' shards
    run->StepDone();
    tokens_seen += batch_size * t_len;
    train::StepMetrics m;
    m.step = run->step();
    m.loss = batch.counted > 0 ? loss_sum / static_cast<double>(batch.counted) : 0.0;
    m.lr = lr;
    m.grad_norm = grad_norm;
    m.seconds = watch.Seconds();
    m.tokens_per_s = static_cast<double>(batch_size * t_len) / std::max(m.seconds, 1e-9);
    m.mfu = std::numeric_limits<double>::quiet_NaN();  // no peak measured for a short job
    m.tokens = tokens_seen;
    m.mem_high_water = train::PeakRssBytes();
    if (run->writer()) run->metrics().Write(m);
    if (hooks.on_step) hooks.on_step(m);
    RETURN_IF_ERROR(run->AfterStep(hooks.run));
    // Every rank evaluated (its share) and holds the same figures: the same verdict.
    if (met()) {
      reached = true;
      if (hooks.run.on_message) {
        hooks.run.on_message(fmt::format(
            "held-out accuracy reached sft.stop_at_accuracy = {} at step {} of {}: stopping here",
            stop_at, run->step(), rc.steps));
      }
    }
  }
  return run->Finish(hooks.run);
}

}  // namespace anvil::rl
