// Pipeline parallelism: the schedules (which forward and backward a stage
// runs when) and a runner that executes one step's micro-batches on this
// rank's stage (model::Llama with a StageRange), receiving activations from
// the previous stage and their grads from the next over the pipeline group.
//
// The math of a micro-batch is the whole model's, so any schedule and any cut
// give the whole model's losses and grads bit for bit (pipeline_test.cc).
// Not yet wired into the trainer (parallel.pp > 1 is refused): the trainer's
// loaders, norms, evaluation and checkpoints across stages come with it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "anvil/comm/group.h"
#include "anvil/kernels/ctx.h"
#include "anvil/model/llama.h"

namespace anvil::parallel {

enum class PipelineSchedule : uint8_t {
  kGPipe,  // every forward, then every backward: M micro-batches in flight
  k1F1B,   // PipeDream-flush: warm-up forwards, then one forward, one backward
           // (stage s of P keeps at most P - s micro-batches in flight)
};

struct PipelineOp {
  bool forward = true;
  int micro = 0;  // micro-batch index
};

// The ops of stage `stage` of `stages` for `micro_batches` micro-batches,
// in the order the stage runs them.
std::vector<PipelineOp> StageOps(PipelineSchedule schedule, int stages, int stage,
                                 int micro_batches);
// The most micro-batches the stage holds at once under the schedule: the
// activation slots its Llama needs (LlamaOptions::activation_slots).
int SlotsNeeded(PipelineSchedule schedule, int stages, int stage, int micro_batches);

class PipelineRunner {
 public:
  // `model` is this rank's stage (stage index = pp.rank(), pp.size() stages,
  // in layer order) with at least SlotsNeeded activation slots.
  PipelineRunner(model::Llama& model, comm::Group& pp, PipelineSchedule schedule);

  // One step: forward and backward of every micro-batch (each stage is given
  // all of them: its token layout; the last stage its targets), grads
  // accumulated into the model's. Returns each micro-batch's loss sum on the
  // last stage (zeros elsewhere). Sends are asynchronous; a slot's sends
  // complete before the slot is reused, and all before this returns.
  std::vector<double> Step(const kernels::KernelCtx& ctx, std::span<const model::Batch> micro,
                           float loss_scale, const model::StepHooks& hooks = {});

 private:
  model::Llama& model_;
  comm::Group& pp_;
  PipelineSchedule schedule_;
};

}  // namespace anvil::parallel
