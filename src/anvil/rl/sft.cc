// Supervised fine-tuning on task problems (sft.h).
#include "anvil/rl/sft.h"

#include <fmt/core.h>

#include <algorithm>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/data/bpe_train.h"
#include "anvil/data/tokenizer_json.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/optim/adamw.h"
#include "anvil/profile/trace.h"

namespace anvil::rl {
namespace {

Result<data::Tokenizer> SftTokenizer(const std::string& name) {
  if (name == "bytes") return data::ByteTokenizer();
  return data::LoadTokenizer(name);
}

// Rows of one step: bos + prompt + answer + eos, inputs and next-token
// targets, the targets of the prompt's positions ignored; padded to the
// context with eos and no targets.
struct SftBatch {
  std::vector<int32_t> tokens, targets;
  int64_t counted = 0;  // targets with a loss
};

Status FillBatch(const Policy& policy, const TaskConfig& task, int64_t first_problem,
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

}  // namespace

Result<PostRunSummary> RunSft(Config config, const PostRunOptions& options,
                              const SftHooks& hooks) {
  ASSIGN_OR_RETURN(const int64_t batch_size, config.GetInt("sft.batch_size", 64));
  if (batch_size < 1 || batch_size > 65536) {
    return InvalidArgument(fmt::format("sft.batch_size = {}: expected 1..65536", batch_size));
  }
  ASSIGN_OR_RETURN(const std::string tokenizer, config.GetString("sft.tokenizer", "bytes"));
  ASSIGN_OR_RETURN(const double stop_at, config.GetDouble("sft.stop_at_accuracy", 0.0));
  if (!(stop_at >= 0 && stop_at <= 1)) {
    return InvalidArgument(fmt::format("sft.stop_at_accuracy = {}: expected 0 (off) .. 1", stop_at));
  }
  const PostRun::FreshPolicy fresh = [&](Config& c, const PostRunConfig& run,
                                         const PolicyOptions& po) -> Result<Policy> {
    ASSIGN_OR_RETURN(const model::ModelConfig mc, model::ModelConfig::FromConfig(c));
    ASSIGN_OR_RETURN(data::Tokenizer tok, SftTokenizer(tokenizer));
    return NewPolicy(mc, std::move(tok), static_cast<uint64_t>(run.seed), po);
  };
  ASSIGN_OR_RETURN(std::unique_ptr<PostRun> run,
                   PostRun::Create(std::move(config), "sft", options, batch_size, fresh));
  Policy& policy = run->policy();
  if (!run->loaded_from().empty() && run->raw_config().Has("model.dim")) {
    // A [model] section beside a checkpoint (sft.init, or a resumed fresh
    // run) must describe it.
    ASSIGN_OR_RETURN(const model::ModelConfig mc, model::ModelConfig::FromConfig(run->raw_config()));
    if (model::HfConfigJson(mc) != model::HfConfigJson(policy.config)) {
      return InvalidArgument(fmt::format(
          "the [model] keys differ from the model of {}/config.json (drop [model] to take the "
          "checkpoint's)",
          run->loaded_from()));
    }
  }
  const PostRunConfig& rc = run->config();
  if (stop_at > 0 && rc.eval_every == 0) {
    return InvalidArgument(
        "sft.stop_at_accuracy needs sft.eval_every > 0: it is checked at the evaluations");
  }
  RETURN_IF_ERROR(run->Start());
  const kernels::KernelCtx& ctx = *policy.ctx;
  model::Llama& model = *policy.llama;
  const int64_t t_len = policy.config.max_seq_len;
  if (hooks.on_start) hooks.on_start(rc, run->first_step());

  SftBatch batch;
  int64_t tokens_seen = run->step() * batch_size * t_len;
  bool reached = false;  // sft.stop_at_accuracy
  while (!reached && !run->Done(hooks.run)) {
    ANVIL_TRACE_ZONE("sft_step");
    Stopwatch watch;
    RETURN_IF_ERROR(FillBatch(policy, rc.task, run->step() * batch_size, batch_size, batch));
    const model::Batch view{.rows = batch_size, .seq_len = t_len, .tokens = batch.tokens,
                            .targets = batch.targets};
    model.ZeroGrads(ctx);
    const model::LossStats loss = model.ForwardBackward(ctx, view, /*loss_scale=*/0.0f);
    model::LlamaParams& params = model.params();
    const double grad_norm = optim::GlobalNorm(ctx.pool(), params.grads());
    const double lr = run->LrAt(run->step());
    run->adamw().Step(ctx, lr, optim::ClipScale(grad_norm, rc.optim.grad_clip), params.weights(),
                      params.grads(), params.bf16());
    run->StepDone();
    tokens_seen += batch_size * t_len;
    train::StepMetrics m;
    m.step = run->step();
    m.loss = loss.mean();
    m.lr = lr;
    m.grad_norm = grad_norm;
    m.seconds = watch.Seconds();
    m.tokens_per_s = static_cast<double>(batch_size * t_len) / std::max(m.seconds, 1e-9);
    m.tokens = tokens_seen;
    m.mem_high_water = train::PeakRssBytes();
    run->metrics().Write(m);
    if (hooks.on_step) hooks.on_step(m);
    RETURN_IF_ERROR(run->AfterStep(hooks.run));
    if (stop_at > 0 && run->last_eval_step() == run->step() &&
        run->last_eval()->accuracy >= stop_at) {
      reached = true;
      if (hooks.run.on_message) {
        hooks.run.on_message(fmt::format(
            "held-out accuracy reached sft.stop_at_accuracy = {} at step {} of {}: stopping here",
            stop_at, run->step(), rc.steps));
      }
    }
  }
  return run->Finish(hooks.run, [&](const TaskEval& e) {
    return fmt::format("\"heldout_accuracy\": {}, \"stopped_at_accuracy\": {}", e.accuracy,
                       reached);
  });
}

}  // namespace anvil::rl
