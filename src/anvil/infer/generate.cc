// Generation: checkpoint + tokenizer loading and the decode loop (see generate.h).
#include "anvil/infer/generate.h"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "anvil/core/clock.h"
#include "anvil/core/config.h"
#include "anvil/data/tokenizer_json.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/infer/stop_strings.h"
#include "anvil/model/decode.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/model/int_linear.h"
#include "anvil/model/packed_linear.h"

namespace anvil::infer {

Result<data::Tokenizer> CheckpointTokenizer(const std::string& checkpoint_dir,
                                            const std::string& override_path,
                                            std::string* path_used) {
  std::string path = override_path;
  // A checkpoint that carries its tokenizer (post-training runs, exports)
  // needs no run data.
  if (path.empty() && std::filesystem::exists(checkpoint_dir + "/tokenizer.json")) {
    path = checkpoint_dir + "/tokenizer.json";
  }
  if (path.empty() && !std::filesystem::exists(checkpoint_dir + "/config.toml")) {
    return NotFound(
        fmt::format("{}: no tokenizer.json, nor a run config naming the data's; pass --tokenizer",
                    checkpoint_dir));
  }
  if (path.empty()) {
    ASSIGN_OR_RETURN(Config run_config, Config::FromFile(checkpoint_dir + "/config.toml"));
    ASSIGN_OR_RETURN(const std::string data_dir, run_config.GetString("data.dir", ""));
    if (data_dir.empty()) {
      return InvalidArgument(fmt::format(
          "{}/config.toml: no data.dir naming the tokenizer; pass --tokenizer", checkpoint_dir));
    }
    path = data_dir + "/tokenizer.json";
  }
  ASSIGN_OR_RETURN(const model::ModelConfig mc, model::ReadHfConfig(checkpoint_dir + "/config.json"));
  ASSIGN_OR_RETURN(data::Tokenizer tok, data::LoadTokenizer(path));
  if (tok.vocab_size() > mc.vocab_size) {
    return InvalidArgument(fmt::format("{}: {} tokens, more than the model's vocab_size {}", path,
                                       tok.vocab_size(), mc.vocab_size));
  }
  if (path_used != nullptr) *path_used = path;
  return tok;
}

Result<GenerateResult> Generate(const GenerateOptions& options,
                                const std::function<void(std::string_view)>& on_text,
                                const std::function<void(const std::string&)>& on_notice) {
  RETURN_IF_ERROR(options.sampling.Validate());
  if (options.max_new < 0) return InvalidArgument("--max-new must be >= 0");
  ASSIGN_OR_RETURN(const model::Precision precision, model::ParsePrecision(options.precision));
  ASSIGN_OR_RETURN(const model::WeightQuant quant, model::ParseWeightQuant(options.quant));
  if (quant != model::WeightQuant::kNone && precision != model::Precision::kF32) {
    return InvalidArgument(fmt::format("--quant {} quantizes the f32 weights: use --precision f32",
                                       options.quant));
  }
  RETURN_IF_ERROR(ValidateStops(options.stop));
  ASSIGN_OR_RETURN(CheckpointModel m,
                   LoadInferenceModel(options.checkpoint, precision, options.threads));
  const io::CheckpointInfo& info = m.info;
  const model::ModelConfig& mc = m.config;
  const kernels::KernelCtx& ctx = *m.ctx;
  if (const std::string note = DelayedScalingNote(m, precision); !note.empty() && on_notice) {
    on_notice(note);
  }
  ASSIGN_OR_RETURN(const data::Tokenizer tok, CheckpointTokenizer(info.dir, options.tokenizer));

  std::vector<int32_t> prompt = {static_cast<int32_t>(tok.bos_id())};
  for (uint32_t id : tok.Encode(options.prompt)) prompt.push_back(static_cast<int32_t>(id));
  const int64_t max_len = mc.max_seq_len;
  GenerateResult r;
  if (static_cast<int64_t>(prompt.size()) > max_len) {
    // A prompt that does not fit keeps bos and its end, with room for the new
    // tokens (up to half the context), and the user is told: a silently
    // shortened prompt reads as a model that ignored its beginning. k new
    // tokens need max_len - k + 1 prompt tokens (the first needs no slot).
    const int64_t room =
        std::clamp<int64_t>(options.max_new, 1, std::max<int64_t>(max_len / 2, 1));
    const int64_t keep = max_len - room + 1;  // bos included; in [1, max_len]
    const int64_t given = static_cast<int64_t>(prompt.size()) - 1;
    r.prompt_tokens_dropped = static_cast<int64_t>(prompt.size()) - keep;
    prompt.erase(prompt.begin() + 1, prompt.begin() + 1 + r.prompt_tokens_dropped);
    if (on_notice) {
      on_notice(fmt::format("the prompt is {} tokens, more than the model's context of {} "
                            "(model.max_seq_len) holds: its first {} tokens are dropped and the "
                            "last {} kept, leaving room for {} new tokens",
                            given, max_len, r.prompt_tokens_dropped,
                            given - r.prompt_tokens_dropped, room));
    }
  }
  Stopwatch quantize_watch;
  // Integer layers (--quant), or f32, bf16 or FP8 weights packed once: every token
  // multiplies by them (the LM head's GEMM would pack its transposed weights
  // at each one, an FP8 layer quantize and decode its weights).
  std::unique_ptr<model::LowPrecisionLinear> linear;
  if (quant != model::WeightQuant::kNone) {
    auto q = std::make_unique<model::IntLinear>(m.forward_weights(), quant, max_len, ctx);
    r.quant_weight_bytes = q->weight_bytes();
    linear = std::move(q);
  } else if (precision == model::Precision::kF32 || precision == model::Precision::kBF16 ||
             model::IsFp8(precision)) {
    auto packed = std::make_unique<model::PackedLinear>(m.forward_weights(), max_len);
    packed->Pack(ctx);
    linear = std::move(packed);
  }
  r.quantize_seconds = quantize_watch.Seconds();
  model::Decoder decoder(m.forward_weights(), 1, max_len, max_len, linear.get());
  std::vector<float> logits(static_cast<size_t>(max_len) * mc.vocab_size);
  r.checkpoint = info.dir;
  r.step = info.step;
  r.prompt_tokens = static_cast<int64_t>(prompt.size());
  Stopwatch watch;
  decoder.Append(ctx, 0, prompt, logits.data());
  r.prefill_seconds = watch.Seconds();
  watch.Reset();
  std::span<const float> last(logits.data() + (prompt.size() - 1) * mc.vocab_size, mc.vocab_size);
  Sampler sampler(options.sampling, ctx.isa());
  r.stop_reason = "max_new";
  for (int64_t i = 0; i < options.max_new; ++i) {
    const int32_t next = sampler.Sample(last, static_cast<uint64_t>(i));
    if (static_cast<uint32_t>(next) == tok.eos_id()) {
      r.stop_reason = "eos";
      break;
    }
    const std::string piece = tok.TokenText(next);
    r.text += piece;
    ++r.new_tokens;
    if (on_text) on_text(piece);
    if (HitsStop(r.text, piece.size(), options.stop)) {
      r.stop_reason = "stop";
      break;
    }
    if (decoder.length(0) >= max_len) {
      r.stop_reason = "max_seq_len";
      break;
    }
    if (i + 1 < options.max_new) {
      const int32_t t = next;
      decoder.Append(ctx, 0, std::span<const int32_t>(&t, 1), logits.data());
      last = std::span<const float>(logits.data(), mc.vocab_size);
    }
  }
  r.decode_seconds = watch.Seconds();
  return r;
}

}  // namespace anvil::infer
