// Pipeline stages (Llama's StageRange and activation slots): a model cut into
// stages and run micro-batch by micro-batch in a schedule's order, the
// activations and their grads handed from stage to stage, gives bitwise the
// losses and grads of the whole model run on the same micro-batches; each
// stage initialises to the whole model's weights; the stage API refuses what
// a stage does not have.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ctx.h"
#include "model_testing.h"

namespace anvil::model {
namespace {

using testing::MakeBatch;
using testing::TestBatch;

constexpr int kMicroBatches = 3;
constexpr int64_t kRows = 2, kSeq = 24;

ModelConfig ThreeLayers() {
  ModelConfig c = testing::MicroConfig();
  c.n_layers = 3;
  return c;
}

// Tensor name -> its values in a model's flat buffer.
std::map<std::string, std::vector<float>> ByName(const LlamaParams& p, std::span<const float> buf) {
  std::map<std::string, std::vector<float>> out;
  for (const ParamInfo& t : p.params()) {
    out[t.name].assign(buf.begin() + t.offset, buf.begin() + t.offset + t.numel);
  }
  return out;
}

struct StepRun {
  std::vector<double> losses;                         // per micro-batch
  std::map<std::string, std::vector<float>> weights;  // after Init
  std::map<std::string, std::vector<float>> grads;    // summed over the micro-batches
};

std::vector<TestBatch> Batches(bool packed) {
  std::vector<TestBatch> b;
  for (int m = 0; m < kMicroBatches; ++m) {
    b.push_back(MakeBatch(kRows, kSeq, ThreeLayers().vocab_size, 40 + m, packed));
  }
  return b;
}

float LossScale(const std::vector<TestBatch>& batches) {
  int64_t counted = 0;
  for (const TestBatch& b : batches) {
    for (int32_t t : b.targets) counted += t != kIgnoreIndex;
  }
  return static_cast<float>(1.0 / static_cast<double>(counted));
}

StepRun Whole(const LlamaOptions& options, bool packed) {
  ThreadPool pool(2);
  kernels::KernelCtx ctx(pool);
  Llama model(ThreeLayers(), options, ctx);
  model.InitWeights(ctx, 11);
  StepRun r;
  r.weights = ByName(model.params(), model.params().weights());
  const std::vector<TestBatch> batches = Batches(packed);
  for (const TestBatch& b : batches) {
    r.losses.push_back(model.ForwardBackward(ctx, b.batch, LossScale(batches)).loss_sum);
  }
  r.grads = ByName(model.params(), model.params().grads());
  return r;
}

// One step of a schedule: stage-by-stage forward or backward of a micro-batch.
struct Op {
  bool forward;
  int micro;
};

// Runs `schedule` over the stages [first layers...] with `slots` activation
// slots (micro-batch m in slot m % slots).
StepRun Staged(LlamaOptions options, bool packed, const std::vector<int>& cuts,
               const std::vector<Op>& schedule, int slots) {
  ThreadPool pool(2);
  kernels::KernelCtx ctx(pool);
  const ModelConfig config = ThreeLayers();
  std::vector<std::unique_ptr<Llama>> stages;
  for (size_t s = 0; s < cuts.size(); ++s) {
    const int end = s + 1 < cuts.size() ? cuts[s + 1] : static_cast<int>(config.n_layers);
    options.stage = {.first_layer = cuts[s], .num_layers = end - cuts[s]};
    options.activation_slots = slots;
    stages.push_back(std::make_unique<Llama>(config, options, ctx));
    stages.back()->InitWeights(ctx, 11);
    stages.back()->ZeroGrads(ctx);
  }
  const std::vector<TestBatch> batches = Batches(packed);
  const float scale = LossScale(batches);
  const int64_t elems = kRows * kSeq * config.dim;
  StepRun r;
  r.losses.assign(kMicroBatches, 0.0);
  for (const Op& op : schedule) {
    const int slot = op.micro % slots;
    const Batch& batch = batches[op.micro].batch;
    if (op.forward) {
      for (size_t s = 0; s < stages.size(); ++s) {
        if (s > 0)
          std::memcpy(stages[s]->stage_input(slot), stages[s - 1]->stage_output(slot),
                      elems * sizeof(float));
        const LossStats l = stages[s]->StageForward(ctx, slot, batch, scale);
        if (s + 1 == stages.size()) r.losses[op.micro] = l.loss_sum;
      }
    } else {
      for (size_t s = stages.size(); s-- > 0;) {
        if (s + 1 < stages.size()) {
          std::memcpy(stages[s]->stage_output_grad(slot), stages[s + 1]->stage_input_grad(slot),
                      elems * sizeof(float));
        }
        stages[s]->StageBackward(ctx, slot, batch);
      }
    }
  }
  for (const auto& stage : stages) {
    r.weights.merge(ByName(stage->params(), stage->params().weights()));
    r.grads.merge(ByName(stage->params(), stage->params().grads()));
  }
  return r;
}

void ExpectSame(const StepRun& whole, const StepRun& staged, const std::string& where) {
  EXPECT_EQ(whole.weights, staged.weights) << where << ": a stage's initial weights";
  for (int m = 0; m < kMicroBatches; ++m) {
    EXPECT_EQ(whole.losses[m], staged.losses[m]) << where << ": loss of micro-batch " << m;
  }
  ASSERT_EQ(whole.grads.size(), staged.grads.size()) << where;
  for (const auto& [name, g] : whole.grads) {
    EXPECT_TRUE(staged.grads.count(name) && staged.grads.at(name) == g)
        << where << ": grad of " << name << " not bitwise the whole model's";
  }
}

const std::vector<Op> kAllForwardThenBackward = {{true, 0},  {true, 1},  {true, 2},
                                                 {false, 0}, {false, 1}, {false, 2}};
// One forward, one backward once the pipe is full (two micro-batches in flight).
const std::vector<Op> kOneFOneB = {{true, 0}, {true, 1},  {false, 0},
                                   {true, 2}, {false, 1}, {false, 2}};

TEST(PipelineStages, StagedRunsAreBitwiseTheWholeModel) {
  for (const Precision precision : {Precision::kF32, Precision::kBF16}) {
    for (const Recompute recompute : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      for (const bool packed : {false, true}) {
        const LlamaOptions options{.precision = precision,
                                   .recompute = recompute,
                                   .max_batch = kRows,
                                   .max_seq_len = kSeq};
        const StepRun whole = Whole(options, packed);
        const std::string where = std::string(PrecisionName(precision)) + " " +
                                  RecomputeName(recompute) + (packed ? " packed" : " windows");
        ExpectSame(whole, Staged(options, packed, {0, 1, 2}, kAllForwardThenBackward, 3),
                   where + ", 3 stages, all forwards first");
        ExpectSame(whole, Staged(options, packed, {0, 2}, kOneFOneB, 2),
                   where + ", 2 stages, 1F1B");
        ExpectSame(whole, Staged(options, packed, {0}, kOneFOneB, 2), where + ", 1 stage, 2 slots");
      }
    }
  }
}

TEST(PipelineStages, UnitsAndLayoutOfAStage) {
  const ModelConfig config = ThreeLayers();
  int64_t size = 0;
  const auto middle = LlamaParams::Layout(config, &size, {}, {.first_layer = 1, .num_layers = 1});
  ASSERT_EQ(middle.size(), 6u);  // one layer's tensors, no embedding, no head
  EXPECT_EQ(middle.front().name, "layers.1.attn_norm");
  EXPECT_EQ(middle.front().offset, 0);
  EXPECT_EQ(middle.front().index, 7);  // the whole model's tensor 7 (embed, 6 of layer 0, then it)
  EXPECT_EQ(Llama::UnitBegins(config, {}, {.first_layer = 1, .num_layers = 1}).size(), 2u);
  const auto last = Llama::UnitBegins(config, {}, {.first_layer = 2});
  EXPECT_EQ(last.size(), 3u);  // layer 2, the head, the end
}

TEST(PipelineStages, RefusesWhatAStageCannotDo) {
  ModelConfig config = ThreeLayers();
  const StageRange beyond{.first_layer = 2, .num_layers = 2},
      empty{.first_layer = 1, .num_layers = 0};
  EXPECT_FALSE(beyond.Check(config).ok());
  EXPECT_FALSE(empty.Check(config).ok());
  config.tie_embeddings = true;
  const StageRange first{.first_layer = 0, .num_layers = 1};
  const Status tied = first.Check(config);
  EXPECT_FALSE(tied.ok());
  EXPECT_NE(tied.message().find("tie_embeddings"), std::string::npos) << tied.message();
  EXPECT_TRUE(StageRange{}.Check(config).ok());
}

}  // namespace
}  // namespace anvil::model
