// Pipeline schedules and the runner (see pipeline.h).
#include "anvil/parallel/pipeline.h"

#include <algorithm>

#include "anvil/profile/trace.h"

namespace anvil::parallel {

std::vector<PipelineOp> StageOps(PipelineSchedule schedule, int stages, int stage,
                                 int micro_batches) {
  CHECK(stages > 0 && stage >= 0 && stage < stages && micro_batches > 0)
      << "stage " << stage << " of " << stages << ", " << micro_batches << " micro-batches";
  std::vector<PipelineOp> ops;
  if (schedule == PipelineSchedule::kGPipe) {
    for (int m = 0; m < micro_batches; ++m) ops.push_back({true, m});
    for (int m = 0; m < micro_batches; ++m) ops.push_back({false, m});
    return ops;
  }
  // 1F1B: the forwards the later stages need before the first backward comes
  // back, then alternate, then drain the backwards.
  const int warmup = std::min(stages - stage - 1, micro_batches);
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward) ops.push_back({true, next_forward});
  while (next_forward < micro_batches) {
    ops.push_back({true, next_forward++});
    ops.push_back({false, next_backward++});
  }
  while (next_backward < micro_batches) ops.push_back({false, next_backward++});
  return ops;
}

int SlotsNeeded(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  int in_flight = 0, most = 0;
  for (const PipelineOp& op : StageOps(schedule, stages, stage, micro_batches)) {
    in_flight += op.forward ? 1 : -1;
    most = std::max(most, in_flight);
  }
  return most;
}

PipelineRunner::PipelineRunner(model::Llama& model, comm::Group& pp, PipelineSchedule schedule)
    : model_(model), pp_(pp), schedule_(schedule) {
  CHECK_EQ(model.first_stage(), pp.rank() == 0) << "stage " << pp.rank() << " and the embedding";
  CHECK_EQ(model.last_stage(), pp.rank() == pp.size() - 1)
      << "stage " << pp.rank() << " and the head";
}

std::vector<double> PipelineRunner::Step(const kernels::KernelCtx& ctx,
                                         std::span<const model::Batch> micro, float loss_scale,
                                         const model::StepHooks& hooks) {
  const int stage = pp_.rank(), stages = pp_.size();
  const int micro_batches = static_cast<int>(micro.size());
  const int slots = model_.options().activation_slots;
  CHECK_GE(slots, SlotsNeeded(schedule_, stages, stage, micro_batches))
      << "the stage's activation slots";
  CHECK_LT(2 * micro_batches, 65536) << "micro-batches beyond the message tags";
  const int64_t dim = model_.config().dim;
  std::vector<double> losses(micro_batches, 0.0);
  std::vector<std::vector<comm::Handle>> sends(slots);  // per slot, until it is reused
  auto settle = [&](int slot) {
    for (comm::Handle& h : sends[slot]) h.Wait();
    sends[slot].clear();
  };
  // Message tags: 2m for micro-batch m's activations, 2m + 1 for their grads.
  for (const PipelineOp& op : StageOps(schedule_, stages, stage, micro_batches)) {
    const model::Batch& batch = micro[op.micro];
    const int slot = op.micro % slots;
    CHECK_LE(batch.n(), model_.options().max_batch * model_.options().max_seq_len)
        << "micro-batch " << op.micro << " beyond the stage's activation buffers";
    const size_t elems = static_cast<size_t>(batch.n() * dim);
    if (op.forward) {
      ANVIL_TRACE_ZONE("pipeline_forward");
      settle(slot);
      if (stage > 0)
        pp_.Recv(std::span<float>(model_.stage_input(slot), elems), stage - 1, 2 * op.micro);
      const model::LossStats l = model_.StageForward(ctx, slot, batch, loss_scale, hooks);
      if (stage + 1 < stages) {
        sends[slot].push_back(pp_.SendAsync(
            std::span<const float>(model_.stage_output(slot), elems), stage + 1, 2 * op.micro));
      } else {
        losses[op.micro] = l.loss_sum;
      }
    } else {
      ANVIL_TRACE_ZONE("pipeline_backward");
      if (stage + 1 < stages) {
        pp_.Recv(std::span<float>(model_.stage_output_grad(slot), elems), stage + 1,
                 2 * op.micro + 1);
      }
      model_.StageBackward(ctx, slot, batch, hooks);
      if (stage > 0) {
        sends[slot].push_back(
            pp_.SendAsync(std::span<const float>(model_.stage_input_grad(slot), elems), stage - 1,
                          2 * op.micro + 1));
      }
    }
  }
  for (int s = 0; s < slots; ++s) settle(s);
  return losses;
}

}  // namespace anvil::parallel
