// Loading a checkpoint's model for inference (checkpoint_model.h).
#include "anvil/infer/checkpoint_model.h"

#include <algorithm>

#include "anvil/kernels/attention.h"
#include "anvil/model/attention_block.h"
#include "anvil/model/checkpoint_weights.h"
#include "anvil/model/hf_checkpoint.h"

namespace anvil::infer {

Result<CheckpointModel> LoadCheckpointModel(const std::string& checkpoint,
                                            model::Precision precision, int threads,
                                            int64_t max_batch) {
  CheckpointModel m;
  ASSIGN_OR_RETURN(m.info, io::OpenCheckpoint(checkpoint));
  ASSIGN_OR_RETURN(m.config, model::ReadHfConfig(m.info.dir + "/config.json"));
  m.pool = std::make_unique<ThreadPool>(threads);
  const size_t scratch = std::max(kernels::KernelCtx::kDefaultScratchBytes,
                                  kernels::AttentionScratchBytes(model::AttentionDimsOf(m.config)));
  m.ctx = std::make_unique<kernels::KernelCtx>(*m.pool, BestIsa(), scratch);
  m.llama = std::make_unique<model::Llama>(
      m.config,
      model::LlamaOptions{.precision = precision, .max_batch = max_batch,
                          .max_seq_len = m.config.max_seq_len},
      *m.ctx);
  m.llama->InitWeights(*m.ctx, 0);  // zeroes the padding; the load overwrites every tensor
  RETURN_IF_ERROR(model::LoadCheckpointWeights(m.info.dir, m.llama->params()));
  m.llama->RefreshBf16Weights(*m.ctx);
  return m;
}

}  // namespace anvil::infer
