// Continuous-batching rollouts over the KV-cache decoder (rollout.h).
#include "anvil/infer/rollout.h"

#include <fmt/core.h>

#include <algorithm>
#include <deque>

#include "anvil/core/clock.h"
#include "anvil/infer/stop_strings.h"
#include "anvil/profile/trace.h"

namespace anvil::infer {

RolloutEngine::RolloutEngine(const model::ForwardWeights& model, const RolloutOptions& options)
    : model_(model),
      options_(options),
      packed_(options.pack_weights && options.linear == nullptr &&
                      (model.precision == model::Precision::kF32 ||
                       model.precision == model::Precision::kBF16 || model::IsFp8(model.precision))
                  ? std::make_unique<model::PackedLinear>(
                        model, std::max(options.max_batch, model.config.max_seq_len))
                  : nullptr),
      // Paged: one more sequence holds the prompt whose samples are starting.
      decoder_(model, options.max_batch + (options.page_rows > 0 ? 1 : 0), model.config.max_seq_len,
               std::max(options.max_batch, model.config.max_seq_len),
               packed_ != nullptr ? packed_.get() : options.linear,
               {.page_rows = options.page_rows}) {}

int64_t RolloutEngine::bytes() const {
  return decoder_.bytes() + (packed_ != nullptr ? packed_->bytes() : 0);
}

Result<std::vector<RolloutSample>> RolloutEngine::Generate(
    const kernels::KernelCtx& ctx, std::span<const std::vector<int32_t>> prompts,
    RolloutStats* stats, uint32_t first_request, const std::function<bool()>& cancel,
    std::span<const SamplingConfig> sampling) {
  ANVIL_TRACE_ZONE("rollout");
  RETURN_IF_ERROR(options_.sampling.Validate());
  if (!sampling.empty() && sampling.size() != prompts.size()) {
    return InvalidArgument(fmt::format("rollout: {} sampling settings for {} prompts",
                                       sampling.size(), prompts.size()));
  }
  for (size_t r = 0; r < sampling.size(); ++r) {
    if (const Status s = sampling[r].Validate(); !s.ok()) {
      return InvalidArgument(fmt::format("rollout: prompt {}'s sampling: {}", r, s.message()));
    }
  }
  // Tensorwise current scaling takes one amax over all the rows of a step, so
  // a sequence's logits would depend on the others in the batch.
  if (!model_.ScalesFixed()) {
    return InvalidArgument(fmt::format(
        "rollout: {} without fixed scales is not batch invariant (use fp8-block or mxfp8, or "
        "fp8-delayed with amax histories of its forward tensors)",
        model::PrecisionName(model_.precision)));
  }
  if (options_.samples < 1) return InvalidArgument("rollout: samples per prompt must be >= 1");
  if (options_.max_new < 1) return InvalidArgument("rollout: max_new must be >= 1");
  RETURN_IF_ERROR(ValidateStops(options_.stop));
  if (!options_.stop.empty() && !options_.token_text) {
    return InvalidArgument(
        "rollout: stop strings need the tokens' text (RolloutOptions::token_text)");
  }
  const int64_t vocab = model_.config.vocab_size, max_len = decoder_.max_len();
  for (size_t r = 0; r < prompts.size(); ++r) {
    const auto& p = prompts[r];
    if (p.empty() || static_cast<int64_t>(p.size()) > max_len) {
      return InvalidArgument(fmt::format("rollout: prompt {} has {} tokens; 1..{} fit the context",
                                         r, p.size(), max_len));
    }
    for (int32_t t : p) {
      if (t < 0 || t >= vocab) {
        return InvalidArgument(fmt::format("rollout: prompt {} holds token {} outside [0, {})", r,
                                           t, vocab));
      }
    }
  }
  Stopwatch watch;
  if (packed_ != nullptr) packed_->Pack(ctx);  // the weights may have changed since the last call
  RolloutStats st;
  const int g = options_.samples;
  std::vector<RolloutSample> out(prompts.size() * g);
  std::vector<std::string> text(options_.stop.empty() ? 0 : out.size());  // for stop strings
  std::deque<int64_t> waiting;  // indices into out, in (request, sample) order
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].request = static_cast<int64_t>(i) / g;
    out[i].sample = static_cast<int>(i % g);
    waiting.push_back(static_cast<int64_t>(i));
  }
  const int64_t slots = options_.max_batch;
  std::vector<int64_t> in_slot(slots, -1);  // the sample a cache slot decodes, -1: free
  // Kept across calls (an RL run generates every step): its pages are
  // touched once, not every call.
  logits_.resize(static_cast<size_t>(std::max(slots, max_len) * vocab));
  const std::span<float> logits(logits_);
  samplers_.resize(std::max(1, ctx.threads()), Sampler(options_.sampling, ctx.isa()));
  // The token of sample i at its next position, from `row` (any thread's
  // sampler, set to its prompt's settings: the draw is addressed, not
  // sequenced).
  auto draw = [&](int64_t i, std::span<const float> row, Sampler& sampler) {
    const RolloutSample& s = out[i];
    sampler.SetConfig(sampling.empty() ? options_.sampling : sampling[s.request]);
    return sampler.Sample(row, first_request + static_cast<uint32_t>(s.request),
                          static_cast<uint32_t>(s.sample), s.tokens.size());
  };
  // Whether token t completes a stop string in sample i's text.
  auto hits_stop = [&](int64_t i, int32_t t) {
    if (text.empty()) return false;
    const std::string piece = options_.token_text(t);
    text[i] += piece;
    return HitsStop(text[i], piece.size(), options_.stop);
  };
  // Takes token t for sample i in `slot`; false once it stops.
  auto take = [&](int64_t i, int64_t slot, const Sampled& t) {
    RolloutSample& s = out[i];
    s.tokens.push_back(t.token);
    s.logprobs.push_back(t.logprob);
    ++st.new_tokens;
    if (t.token == options_.eos) {
      s.stop_reason = "eos";
    } else if (hits_stop(i, t.token)) {
      s.stop_reason = "stop";
    } else if (static_cast<int64_t>(s.tokens.size()) >= options_.max_new) {
      s.stop_reason = "max_new";
    } else if (decoder_.length(slot) >= max_len) {
      s.stop_reason = "max_seq_len";  // no cache position left for it
    }
    return s.stop_reason.empty();
  };
  std::vector<int64_t> seqs;
  std::vector<int32_t> next;
  std::vector<Sampled> drawn;
  // Paged: the prompt whose samples are starting (samples start in request
  // order, so one at a time) is held in sequence `holder` with the logits
  // of its last position, and forked into each sample's slot.
  const bool share = options_.page_rows > 0 && g > 1;
  const int64_t holder = slots;
  int64_t held = -1;  // the request held
  std::vector<float> held_logits(share ? vocab : 0);
  std::vector<int64_t> fill_slots, fill_samples;
  std::vector<std::span<const int32_t>> fill_prompts;
  while (true) {
    // Free slots take waiting samples: their prompts prefilled together (as
    // many as a call's rows hold), then their first tokens; a sample done at
    // its first token frees its slot for the next waiting one.
    while (!share && !waiting.empty()) {
      fill_slots.clear();
      fill_samples.clear();
      fill_prompts.clear();
      int64_t rows = 0;
      for (int64_t slot = 0; slot < slots && !waiting.empty(); ++slot) {
        if (in_slot[slot] >= 0) continue;
        const std::vector<int32_t>& prompt = prompts[out[waiting.front()].request];
        const int64_t n = static_cast<int64_t>(prompt.size());
        if (rows + n > decoder_.max_rows()) break;
        rows += n;
        fill_slots.push_back(slot);
        fill_samples.push_back(waiting.front());
        fill_prompts.push_back(prompt);
        waiting.pop_front();
      }
      if (fill_slots.empty()) break;  // no free slot
      for (const int64_t slot : fill_slots) decoder_.Reset(slot);
      decoder_.Prefill(ctx, fill_slots, fill_prompts, logits.data());
      st.prompt_tokens += rows;
      for (size_t q = 0; q < fill_slots.size(); ++q) {
        const int64_t i = fill_samples[q];
        const std::span<const float> row = std::span<const float>(logits).subspan(q * vocab, vocab);
        if (take(i, fill_slots[q], draw(i, row, samplers_[0]))) in_slot[fill_slots[q]] = i;
      }
    }
    // Paged with shared prompts: one prompt at a time, forked into its samples' slots.
    for (int64_t slot = 0; share && slot < slots; ++slot) {
      while (in_slot[slot] < 0 && !waiting.empty()) {
        const int64_t i = waiting.front();
        waiting.pop_front();
        const int64_t request = out[i].request;
        const std::vector<int32_t>& prompt = prompts[request];
        const int64_t n = static_cast<int64_t>(prompt.size());
        std::span<const float> row;
        if (held == request) {
          decoder_.Fork(holder, slot, n);
          row = held_logits;
        } else {
          decoder_.Reset(slot);
          decoder_.Append(ctx, slot, prompt, logits.data());
          st.prompt_tokens += n;
          row = std::span<const float>(logits).subspan((n - 1) * vocab, vocab);
          decoder_.Fork(slot, holder, n);
          std::copy(row.begin(), row.end(), held_logits.begin());
          held = request;
        }
        if (out[i].sample == g - 1) {  // the prompt's last sample: let it go
          decoder_.Reset(holder);
          held = -1;
        }
        if (take(i, slot, draw(i, row, samplers_[0]))) in_slot[slot] = i;
      }
    }
    seqs.clear();
    next.clear();
    for (int64_t slot = 0; slot < slots; ++slot) {
      if (in_slot[slot] < 0) continue;
      seqs.push_back(slot);
      next.push_back(out[in_slot[slot]].tokens.back());
    }
    if (seqs.empty()) break;  // nothing in flight and nothing waiting
    if (cancel && cancel()) return Cancelled("rollouts cancelled");
    decoder_.Step(ctx, seqs, next, logits.data());
    ++st.steps;
    drawn.resize(seqs.size());
    ctx.pool().ParallelFor(static_cast<int64_t>(seqs.size()), [&](int64_t b, int64_t e, int t) {
      for (int64_t r = b; r < e; ++r) {
        drawn[r] = draw(in_slot[seqs[r]], std::span<const float>(logits).subspan(r * vocab, vocab),
                        samplers_[t]);
      }
    });
    for (size_t r = 0; r < seqs.size(); ++r) {
      const int64_t slot = seqs[r];
      if (!take(in_slot[slot], slot, drawn[r])) in_slot[slot] = -1;
    }
  }
  st.seconds = watch.Seconds();
  st.engine_bytes = bytes();
  if (stats != nullptr) *stats = st;
  return out;
}

namespace {

// The rows a scoring forward reads: each sample's prompt and completion from
// position 0, in rows of `t_len`, padded; a sample that does not fit is an error.
Status CheckSamplesFit(std::span<const std::vector<int32_t>> prompts,
                       std::span<const RolloutSample> samples, int64_t t_len) {
  for (const RolloutSample& s : samples) {
    if (s.request < 0 || s.request >= static_cast<int64_t>(prompts.size()) || s.tokens.empty() ||
        prompts[s.request].size() + s.tokens.size() - 1 > static_cast<size_t>(t_len)) {
      return InvalidArgument(fmt::format(
          "recomputing log-probs: sample {} of request {} ({} tokens) does not fit a row of {}",
          s.sample, s.request, s.tokens.size(), t_len));
    }
  }
  return Status::Ok();
}

void FillRows(std::span<const std::vector<int32_t>> prompts, std::span<const RolloutSample> samples,
              int64_t t_len, std::vector<int32_t>& tokens) {
  tokens.assign(samples.size() * t_len, 0);
  for (size_t r = 0; r < samples.size(); ++r) {
    const RolloutSample& s = samples[r];
    const std::vector<int32_t>& prompt = prompts[s.request];
    // The last token is predicted, never read.
    std::copy(prompt.begin(), prompt.end(), tokens.begin() + r * t_len);
    std::copy(s.tokens.begin(), s.tokens.end() - 1, tokens.begin() + r * t_len + prompt.size());
  }
}

int64_t RowLength(const model::Llama& model) {
  return model.options().max_seq_len > 0 ? model.options().max_seq_len : model.config().max_seq_len;
}

}  // namespace

Result<std::vector<std::vector<double>>> RecomputeLogProbs(
    model::Llama& model, const kernels::KernelCtx& ctx,
    std::span<const std::vector<int32_t>> prompts, std::span<const RolloutSample> samples,
    std::span<const SamplingConfig> sampling, const HeadInputFn& head_input) {
  ANVIL_TRACE_ZONE("recompute_logprobs");
  if (sampling.empty() || (sampling.size() != 1 && sampling.size() != prompts.size())) {
    return InvalidArgument(fmt::format(
        "recomputing log-probs: {} sampling settings for {} prompts (expected 1 or one each)",
        sampling.size(), prompts.size()));
  }
  const int64_t t_len = RowLength(model);
  const int64_t vocab = model.config().vocab_size;
  constexpr int64_t kLogitsBudget = int64_t{64} << 20;  // bytes
  const int64_t rows_per_call =
      std::clamp<int64_t>(kLogitsBudget / (t_len * vocab * static_cast<int64_t>(sizeof(float))), 1,
                          model.options().max_batch);
  RETURN_IF_ERROR(CheckSamplesFit(prompts, samples, t_len));
  std::vector<int32_t> tokens;
  std::vector<float> logits(static_cast<size_t>(rows_per_call * t_len * vocab));
  std::vector<Sampler> samplers(std::max(1, ctx.threads()), Sampler(sampling[0], ctx.isa()));
  std::vector<std::vector<double>> out(samples.size());
  for (size_t first = 0; first < samples.size(); first += rows_per_call) {
    const int64_t rows = std::min<int64_t>(rows_per_call, samples.size() - first);
    FillRows(prompts, samples.subspan(first, rows), t_len, tokens);
    const model::Batch batch{.rows = rows, .seq_len = t_len, .tokens = tokens, .targets = tokens};
    model::StepHooks hooks;
    if (head_input) {
      hooks.head_input = [&](const float* x, float*, int64_t) {
        head_input(x, first, rows, t_len);
      };
    }
    model.Logits(ctx, batch, logits.data(), hooks);
    ctx.pool().ParallelFor(rows, [&](int64_t b, int64_t e, int t) {
      for (int64_t r = b; r < e; ++r) {
        const RolloutSample& s = samples[first + r];
        samplers[t].SetConfig(sampling[sampling.size() == 1 ? 0 : s.request]);
        const int64_t start = r * t_len + static_cast<int64_t>(prompts[s.request].size()) - 1;
        for (size_t j = 0; j < s.tokens.size(); ++j) {
          const std::span<const float> row(logits.data() + (start + j) * vocab, vocab);
          out[first + r].push_back(samplers[t].LogProb(row, s.tokens[j]));
        }
      }
    });
  }
  return out;
}

Status ForwardHeadInputs(model::Llama& model, const kernels::KernelCtx& ctx,
                         std::span<const std::vector<int32_t>> prompts,
                         std::span<const RolloutSample> samples, const HeadInputFn& head_input) {
  ANVIL_TRACE_ZONE("forward_head_inputs");
  if (!head_input) return InvalidArgument("ForwardHeadInputs: no head_input to call");
  const int64_t t_len = RowLength(model);
  RETURN_IF_ERROR(CheckSamplesFit(prompts, samples, t_len));
  const int64_t rows_per_call = model.options().max_batch;
  std::vector<int32_t> tokens;
  for (size_t first = 0; first < samples.size(); first += rows_per_call) {
    const int64_t rows = std::min<int64_t>(rows_per_call, samples.size() - first);
    FillRows(prompts, samples.subspan(first, rows), t_len, tokens);
    const model::Batch batch{.rows = rows, .seq_len = t_len, .tokens = tokens, .targets = tokens};
    model::StepHooks hooks;
    hooks.head_input = [&](const float* x, float*, int64_t) { head_input(x, first, rows, t_len); };
    model.Forward(ctx, batch, hooks);
  }
  return Status::Ok();
}

}  // namespace anvil::infer
