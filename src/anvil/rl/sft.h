// Supervised fine-tuning on a task's prompt/answer pairs (`anvil sft`),
// generated or a user's file (tasks.h): the starting policy of an RL run.
// Step s trains on train-split problems [s * B, (s + 1) * B) (B =
// sft.batch_size; a file's modulo its size), one per row: bos, the prompt,
// the answer and eos, with the loss on the answer and eos only (the prompt's
// positions have no target), averaged over those tokens. The model is new
// (model.* and sft.tokenizer, "bytes" by default: one token per character,
// data/bpe_train.h) or a checkpoint's (sft.init). Held-out accuracy
// (task_eval.h) every sft.eval_every steps and at the end (a run stopped by
// Ctrl-C skips the end's; one stopped by sft.max_minutes does not). With
// sft.stop_at_accuracy > 0 the run ends at the first evaluation that reaches
// it: a deliberately partial policy, as an RL run that should have something
// left to learn starts from (small models learn carries in a sudden jump, so
// a step count alone lands before or after it depending on the seed).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "anvil/core/config.h"
#include "anvil/core/status.h"
#include "anvil/rl/policy.h"
#include "anvil/rl/post_run.h"
#include "anvil/rl/tasks.h"
#include "anvil/train/metrics.h"

namespace anvil::rl {

struct SftHooks {
  PostRunHooks run;
  // Before the first step: the run's settings and the steps already done.
  std::function<void(const PostRunConfig& config, int64_t first_step)> on_start = nullptr;  // before the first step
  std::function<void(const train::StepMetrics&)> on_step = nullptr;
};

Result<PostRunSummary> RunSft(Config config, const PostRunOptions& options, const SftHooks& hooks);

// The rows of one step: bos + prompt + answer + eos, inputs and next-token
// targets, the targets of the prompt's positions ignored (model::kIgnoreIndex);
// padded to the context with eos and no targets.
struct SftBatch {
  std::vector<int32_t> tokens, targets;  // [rows, max_seq_len] each
  int64_t counted = 0;                   // targets with a loss
};

// Train-split problems [first_problem, first_problem + rows) of `task`.
Status FillSftBatch(const Policy& policy, const TaskConfig& task, int64_t first_problem,
                    int64_t rows, SftBatch& b);

}  // namespace anvil::rl
