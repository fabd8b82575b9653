// Pipeline parallelism over MPI: rank r runs stage r of a 4-layer model
// (layers cut as evenly as they go, the last stage taking the remainder),
// the runner sends activations and grads between them, and every rank checks
// its stage against the whole model run locally on the same micro-batches:
// each micro-batch's loss (last stage) and every grad of the stage's tensors
// bitwise, for GPipe and 1F1B, f32 and bf16, with and without recompute.
// Also the schedules' op lists and slot counts. Exit 0 when every rank passed.
#include "anvil/parallel/pipeline.h"

#include <fmt/core.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "anvil/comm/world.h"
#include "anvil/core/thread_pool.h"
#include "model_testing.h"
#include "mpi_testing.h"

namespace anvil::parallel {
namespace {

using anvil::testing::Expect;
using anvil::testing::g_failures;
using anvil::testing::g_rank;

constexpr int kMicroBatches = 5;
constexpr int64_t kRows = 2, kSeq = 16;

model::ModelConfig FourLayers() {
  model::ModelConfig c = model::testing::MicroConfig();
  c.n_layers = 4;
  return c;
}

std::map<std::string, std::vector<float>> Grads(const model::LlamaParams& p) {
  std::map<std::string, std::vector<float>> out;
  for (const model::ParamInfo& t : p.params()) {
    out[t.name].assign(p.grads().begin() + t.offset, p.grads().begin() + t.offset + t.numel);
  }
  return out;
}

void CheckSchedules() {
  // 1F1B on 4 stages, 6 micro-batches: stage 0 warms up with 3 forwards.
  const std::vector<PipelineOp> ops = StageOps(PipelineSchedule::k1F1B, 4, 0, 6);
  std::string order;
  for (const PipelineOp& op : ops) order += fmt::format("{}{} ", op.forward ? 'F' : 'B', op.micro);
  Expect(order == "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ", "1F1B order of stage 0: " + order);
  Expect(SlotsNeeded(PipelineSchedule::k1F1B, 4, 0, 6) == 4, "1F1B slots of stage 0");
  Expect(SlotsNeeded(PipelineSchedule::k1F1B, 4, 3, 6) == 1, "1F1B slots of the last stage");
  Expect(SlotsNeeded(PipelineSchedule::kGPipe, 4, 1, 6) == 6, "GPipe slots");
}

void CheckRun(comm::Group& pp, PipelineSchedule schedule, model::Precision precision,
              model::Recompute recompute) {
  const std::string where =
      fmt::format("{} {} {}", schedule == PipelineSchedule::kGPipe ? "gpipe" : "1f1b",
                  model::PrecisionName(precision), model::RecomputeName(recompute));
  ThreadPool pool(1);
  kernels::KernelCtx ctx(pool);
  const model::ModelConfig config = FourLayers();
  std::vector<model::testing::TestBatch> batches;
  std::vector<model::Batch> micro;
  int64_t counted = 0;
  for (int m = 0; m < kMicroBatches; ++m) {
    batches.push_back(
        model::testing::MakeBatch(kRows, kSeq, config.vocab_size, 70 + m, m % 2 == 1));
  }
  for (const auto& b : batches) {
    micro.push_back(b.batch);
    for (int32_t t : b.targets) counted += t != model::kIgnoreIndex;
  }
  const float scale = static_cast<float>(1.0 / static_cast<double>(counted));
  model::LlamaOptions options{
      .precision = precision, .recompute = recompute, .max_batch = kRows, .max_seq_len = kSeq};
  // The whole model, here.
  model::Llama whole(config, options, ctx);
  whole.InitWeights(ctx, 23);
  whole.ZeroGrads(ctx);
  std::vector<double> whole_losses;
  for (const model::Batch& b : micro)
    whole_losses.push_back(whole.ForwardBackward(ctx, b, scale).loss_sum);
  // This rank's stage.
  const int stages = pp.size(), stage = pp.rank();
  const int per = static_cast<int>(config.n_layers) / stages;
  const int first = stage * per;
  const int count = stage + 1 == stages ? static_cast<int>(config.n_layers) - first : per;
  options.stage = {.first_layer = first, .num_layers = count};
  options.activation_slots = SlotsNeeded(schedule, stages, stage, kMicroBatches);
  model::Llama part(config, options, ctx);
  part.InitWeights(ctx, 23);
  part.ZeroGrads(ctx);
  PipelineRunner runner(part, pp, schedule);
  const std::vector<double> losses = runner.Step(ctx, micro, scale);
  if (stage + 1 == stages) {
    for (int m = 0; m < kMicroBatches; ++m) {
      Expect(losses[m] == whole_losses[m], fmt::format("{}: loss of micro-batch {}: {} vs {}",
                                                       where, m, losses[m], whole_losses[m]));
    }
  }
  const auto want = Grads(whole.params());
  for (const auto& [name, g] : Grads(part.params())) {
    Expect(want.at(name) == g, where + ": grad of " + name + " is not the whole model's");
  }
}

int Main() {
  auto world = comm::InitWorld({.timeout_s = 120.0});
  if (!world.ok()) {
    std::fprintf(stderr, "%s\n", world.status().ToString().c_str());
    return 1;
  }
  comm::Group& pp = **world;
  g_rank = pp.rank();
  CheckSchedules();
  for (const auto schedule : {PipelineSchedule::kGPipe, PipelineSchedule::k1F1B}) {
    for (const auto precision : {model::Precision::kF32, model::Precision::kBF16}) {
      for (const auto recompute : {model::Recompute::kNone, model::Recompute::kFull}) {
        CheckRun(pp, schedule, precision, recompute);
      }
    }
  }
  const int64_t failures = pp.AllReduceValue<int64_t>(g_failures);
  if (g_rank == 0) {
    std::printf("%s: %d stages, %lld failures\n", failures ? "FAILED" : "ok", pp.size(),
                static_cast<long long>(failures));
  }
  comm::FinalizeWorld();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace anvil::parallel

int main() { return anvil::parallel::Main(); }
