// ExportCheckpoint (see export.h).
#include "anvil/train/export.h"

#include <fmt/core.h>

#include <filesystem>

#include "anvil/core/file_util.h"
#include "anvil/data/tokenizer_json.h"
#include "anvil/infer/generate.h"
#include "anvil/io/checkpoint.h"
#include "anvil/model/checkpoint_weights.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/model/weights.h"

namespace anvil::train {

Result<ExportResult> ExportCheckpoint(const ExportOptions& options) {
  if (options.out.empty()) return InvalidArgument("no output folder given (--out)");
  ASSIGN_OR_RETURN(const io::CheckpointInfo info,
                   io::OpenCheckpoint(options.checkpoint, io::CheckpointRead::kModel));
  ASSIGN_OR_RETURN(const model::ModelConfig mc, model::ReadHfConfig(info.dir + "/config.json"));
  std::string tokenizer;
  RETURN_IF_ERROR(infer::CheckpointTokenizer(info.dir, options.tokenizer, &tokenizer).status());
  // Every tensor goes through the loader: a shape or name that does not fit
  // the config is an error here, not in the user's next program.
  model::LlamaParams params(mc, /*with_bf16=*/false);
  RETURN_IF_ERROR(model::LoadCheckpointWeights(info.dir, params));
  RETURN_IF_ERROR(MakeDirectories(options.out));
  ASSIGN_OR_RETURN(const data::Tokenizer tok, data::LoadTokenizer(tokenizer));
  // The special tokens' ids in config.json: a Hugging Face generate() stops at <|eos|>.
  RETURN_IF_ERROR(model::SaveHfCheckpoint(options.out, params,
                                          {{"bos_token_id", tok.bos_id()},
                                           {"eos_token_id", tok.eos_id()},
                                           {"pad_token_id", tok.pad_id()}}));
  ASSIGN_OR_RETURN(const std::string tokenizer_text, ReadFile(tokenizer));
  RETURN_IF_ERROR(WriteFileAtomic(options.out + "/tokenizer.json", tokenizer_text));
  return ExportResult{.checkpoint_dir = info.dir, .step = info.step, .parameters = mc.NumParams()};
}

}  // namespace anvil::train
