// Off-by-one rollouts on a rank of their own (remote_rollouts.h).
#include "anvil/rl/remote_rollouts.h"

#include <fmt/core.h>

#include <array>
#include <cstring>
#include <nlohmann/json.hpp>
#include <span>

#include "anvil/comm/world.h"
#include "anvil/core/check.h"
#include "anvil/model/config.h"
#include "anvil/model/hf_checkpoint.h"
#include "anvil/rl/rollout_wire.h"

namespace anvil::rl {
namespace {

// Tags keep the three conversations apart on the world group.
constexpr int kSetupTag = 71;
constexpr int kDrawTag = 72;
constexpr int kReplyTag = 73;

// A draw's header: what follows it (none for kStop).
enum Command : int64_t { kStop = 0, kDraw = 1 };
enum DrawField : int { kCommand, kStep, kStaleness, kPrompts, kPromptWords, kDrawFields };
// A reply (after its status): counts, then the samples.
enum ReplyField : int {
  kSamples,
  kTokens,
  kPromptTokens,
  kNewTokens,
  kSteps,
  kEngineBytes,
  kReplyFields
};

// A byte string, its size first.
void SendText(comm::Group& world, int peer, int tag, const std::string& text) {
  const int64_t size = static_cast<int64_t>(text.size());
  world.Send(std::span<const int64_t>(&size, 1), peer, tag);
  const auto* bytes = reinterpret_cast<const std::byte*>(text.data());
  world.Send(std::span<const std::byte>(bytes, text.size()), peer, tag);
}
std::string RecvText(comm::Group& world, int peer, int tag) {
  int64_t size = 0;
  world.Recv(std::span<int64_t>(&size, 1), peer, tag);
  std::string text(static_cast<size_t>(size), '\0');
  world.Recv(std::span<std::byte>(reinterpret_cast<std::byte*>(text.data()), text.size()), peer,
             tag);
  return text;
}

// A status: its code, then its message.
void SendStatus(comm::Group& world, int peer, int tag, const Status& s) {
  const int64_t code = static_cast<int64_t>(s.code());
  world.Send(std::span<const int64_t>(&code, 1), peer, tag);
  SendText(world, peer, tag, s.message());
}
Status RecvStatus(comm::Group& world, int peer, int tag) {
  int64_t code = 0;
  world.Recv(std::span<int64_t>(&code, 1), peer, tag);
  std::string message = RecvText(world, peer, tag);
  return code == 0 ? Status::Ok() : Status(static_cast<StatusCode>(code), std::move(message));
}

// Every token's text, length-prefixed, for stop strings on the other side.
std::string TokenTexts(const infer::RolloutOptions& o, int64_t vocab) {
  std::string out;
  for (int64_t t = 0; t < vocab; ++t) {
    const std::string text = o.token_text(static_cast<int32_t>(t));
    const auto size = static_cast<uint32_t>(text.size());
    out.append(reinterpret_cast<const char*>(&size), sizeof(size));
    out += text;
  }
  return out;
}
Result<std::vector<std::string>> ParseTokenTexts(const std::string& blob, int64_t vocab) {
  std::vector<std::string> texts;
  size_t at = 0;
  for (int64_t t = 0; t < vocab; ++t) {
    uint32_t size = 0;
    if (at + sizeof(size) > blob.size()) return DataLoss("rollout setup: token texts cut short");
    std::memcpy(&size, blob.data() + at, sizeof(size));
    at += sizeof(size);
    if (at + size > blob.size()) return DataLoss("rollout setup: token texts cut short");
    texts.emplace_back(blob.data() + at, size);
    at += size;
  }
  return texts;
}

// The rollout rank's engine, as the trainer described it.
struct Setup {
  model::ModelConfig config;
  model::ForwardOptions forward;  // precision and FP8 recipe
  model::WeightQuant quant = model::WeightQuant::kNone;
  int threads = 1;
  double timeout_s = 600;  // the watchdog's limit (comm.timeout_s)
  infer::RolloutOptions options;
  std::vector<std::string> token_texts;  // stop strings' (empty without)
  std::string kernels;  // the trainer's (KernelCtx::BitsName): the rollout rank's must match
};

std::string SetupJson(const model::ModelConfig& config, const model::ForwardOptions& forward,
                      const std::string& kernels, model::WeightQuant quant, int threads,
                      double timeout_s, const infer::RolloutOptions& o) {
  nlohmann::ordered_json j;
  j["model"] = nlohmann::json::parse(model::HfConfigJson(config));
  j["precision"] = model::PrecisionName(forward.precision);
  const model::Fp8Recipe& r = forward.fp8;  // its kind follows the precision
  j["fp8"] = {{"forward", static_cast<int>(r.forward)},
              {"grad", static_cast<int>(r.grad)},
              {"mx_rule", static_cast<int>(r.mx_rule)},
              {"decode", static_cast<int>(r.decode)},
              {"amax_history", r.amax_history},
              {"amax_most_recent", r.amax_most_recent},
              {"high_precision_bf16", r.high_precision_bf16},
              {"high_precision_layers", forward.fp8_high_precision_layers}};
  j["kernels"] = kernels;
  j["quant"] = model::WeightQuantName(quant);
  j["threads"] = threads;
  j["timeout_s"] = timeout_s;
  j["max_batch"] = o.max_batch;
  j["max_new"] = o.max_new;
  j["samples"] = o.samples;
  j["eos"] = o.eos;
  j["page_rows"] = o.page_rows;
  j["pack_weights"] = o.pack_weights;
  j["greedy"] = o.sampling.greedy;
  j["temperature"] = o.sampling.temperature;
  j["top_k"] = o.sampling.top_k;
  j["top_p"] = o.sampling.top_p;
  j["seed"] = o.sampling.seed;
  j["stop"] = o.stop;
  return j.dump();
}

Result<Setup> ParseSetup(const std::string& text, const std::string& token_texts) {
  Setup s;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    ASSIGN_OR_RETURN(s.config, model::ParseHfConfig(j.at("model").dump(), "rollout setup"));
    ASSIGN_OR_RETURN(s.forward.precision,
                     model::ParsePrecision(j.at("precision").get<std::string>()));
    const nlohmann::json& f = j.at("fp8");
    model::Fp8Recipe& r = s.forward.fp8;
    r.forward = static_cast<kernels::Fp8Format>(f.at("forward").get<int>());
    r.grad = static_cast<kernels::Fp8Format>(f.at("grad").get<int>());
    r.mx_rule = static_cast<kernels::BlockScale>(f.at("mx_rule").get<int>());
    r.decode = static_cast<kernels::Fp8Decode>(f.at("decode").get<int>());
    r.amax_history = f.at("amax_history").get<int>();
    r.amax_most_recent = f.at("amax_most_recent").get<bool>();
    r.high_precision_bf16 = f.at("high_precision_bf16").get<bool>();
    s.forward.fp8_high_precision_layers = f.at("high_precision_layers").get<int>();
    s.kernels = j.at("kernels").get<std::string>();
    ASSIGN_OR_RETURN(s.quant, model::ParseWeightQuant(j.at("quant").get<std::string>()));
    s.threads = j.at("threads").get<int>();
    s.timeout_s = j.at("timeout_s").get<double>();
    infer::RolloutOptions& o = s.options;
    o.max_batch = j.at("max_batch").get<int64_t>();
    o.max_new = j.at("max_new").get<int64_t>();
    o.samples = j.at("samples").get<int>();
    o.eos = j.at("eos").get<int32_t>();
    o.page_rows = j.at("page_rows").get<int64_t>();
    o.pack_weights = j.at("pack_weights").get<bool>();
    o.sampling.greedy = j.at("greedy").get<bool>();
    o.sampling.temperature = j.at("temperature").get<double>();
    o.sampling.top_k = j.at("top_k").get<int>();
    o.sampling.top_p = j.at("top_p").get<double>();
    o.sampling.seed = j.at("seed").get<uint64_t>();
    o.stop = j.at("stop").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return DataLoss(fmt::format("rollout setup: {}", e.what()));
  }
  if (s.threads < 1 || !(s.timeout_s > 0)) {
    return InvalidArgument("rollout setup: threads < 1 or timeout_s <= 0");
  }
  if (!s.options.stop.empty()) {
    ASSIGN_OR_RETURN(s.token_texts, ParseTokenTexts(token_texts, s.config.vocab_size));
  }
  return s;
}

}  // namespace

RemoteRollouts::RemoteRollouts(comm::Group& world, int rollout_rank,
                               const infer::RolloutOptions& options, int64_t weights, bool delayed)
    : world_(world), peer_(rollout_rank), options_(options), snapshot_(weights), delayed_(delayed) {
  options_.token_text = nullptr;  // only the rollout rank reads texts
  options_.linear = nullptr;
}

Result<std::unique_ptr<RemoteRollouts>> RemoteRollouts::Create(comm::Group& world, int rollout_rank,
                                                               const Policy& policy,
                                                               const infer::RolloutOptions& options,
                                                               model::WeightQuant quant,
                                                               int threads, double timeout_s) {
  CHECK(rollout_rank != world.rank() && rollout_rank >= 0 && rollout_rank < world.size())
      << "rollout rank " << rollout_rank;
  const model::ForwardOptions forward = ForwardOptionsOf(*policy.llama);
  if (options.linear != nullptr) {
    return InvalidArgument("rollouts on another rank quantize their own layers: pass `quant`");
  }
  const model::ModelConfig& config = policy.config;
  SendText(world, rollout_rank, kSetupTag,
           SetupJson(config, forward, policy.Kernels(), quant, threads, timeout_s, options));
  SendText(world, rollout_rank, kSetupTag,
           options.stop.empty() ? std::string() : TokenTexts(options, config.vocab_size));
  if (Status s = RecvStatus(world, rollout_rank, kSetupTag); !s.ok()) {
    return s.WithContext(fmt::format("the rollout rank {}", rollout_rank));
  }
  comm::SetWatchdogTimeout(timeout_s);
  const std::span<const float> weights = policy.llama->params().weights();
  std::unique_ptr<RemoteRollouts> r(new RemoteRollouts(world, rollout_rank, options,
                                                       static_cast<int64_t>(weights.size()),
                                                       policy.llama->fp8_delayed() != nullptr));
  r->Snapshot(*policy.llama);
  return r;
}

RemoteRollouts::~RemoteRollouts() {
  Cancel();
  const std::array<int64_t, kDrawFields> stop = {kStop, 0, 0, 0, 0};
  world_.Send(std::span<const int64_t>(stop), peer_, kDrawTag);
}

void RemoteRollouts::Snapshot(const model::Llama& policy) {
  CHECK(!in_flight_) << "a snapshot while its rollouts are drawn";
  const std::span<const float> from = policy.params().weights();
  CHECK_EQ(from.size(), snapshot_.size());
  std::copy(from.begin(), from.end(), snapshot_.begin());
  snapshot_delayed_ = DelayedState(policy);
}

void RemoteRollouts::Start(std::vector<std::vector<int32_t>> prompts, int64_t step, int staleness) {
  CHECK(!in_flight_) << "one draw at a time";
  prompt_words_.clear();
  for (const std::vector<int32_t>& p : prompts) {
    prompt_words_.push_back(static_cast<int32_t>(p.size()));
    prompt_words_.insert(prompt_words_.end(), p.begin(), p.end());
  }
  header_ = {kDraw, step, staleness, static_cast<int64_t>(prompts.size()),
             static_cast<int64_t>(prompt_words_.size())};
  // Sent while the trainer trains; the buffers stay untouched until Wait.
  sends_.clear();
  sends_.push_back(world_.SendAsync(std::span<const int64_t>(header_), peer_, kDrawTag));
  sends_.push_back(world_.SendAsync(std::span<const int32_t>(prompt_words_), peer_, kDrawTag));
  sends_.push_back(world_.SendAsync(std::span<const float>(snapshot_), peer_, kDrawTag));
  if (delayed_) {
    sends_.push_back(world_.SendAsync(std::span<const double>(snapshot_delayed_), peer_, kDrawTag));
  }
  in_flight_ = true;
}

Result<Rollouts> RemoteRollouts::Wait() {
  CHECK(in_flight_) << "no draw started";
  for (comm::Handle& h : sends_) h.Wait();
  in_flight_ = false;
  RETURN_IF_ERROR(RecvStatus(world_, peer_, kReplyTag));
  std::array<int64_t, kReplyFields> head{};
  world_.Recv(std::span<int64_t>(head), peer_, kReplyTag);
  double seconds = 0;
  world_.Recv(std::span<double>(&seconds, 1), peer_, kReplyTag);
  SamplesWire wire;
  wire.meta.resize(static_cast<size_t>(SamplesWire::kMetaFields * head[kSamples]));
  wire.tokens.resize(static_cast<size_t>(head[kTokens]));
  wire.logprobs.resize(wire.tokens.size());
  world_.Recv(std::span<int64_t>(wire.meta), peer_, kReplyTag);
  world_.Recv(std::span<int32_t>(wire.tokens), peer_, kReplyTag);
  world_.Recv(std::span<double>(wire.logprobs), peer_, kReplyTag);
  Rollouts r;
  r.sampling = options_.sampling;
  r.group_size = options_.samples;
  r.staleness = static_cast<int>(header_[kStaleness]);
  r.stats = {.prompt_tokens = head[kPromptTokens],
             .new_tokens = head[kNewTokens],
             .steps = head[kSteps],
             .seconds = seconds,
             .engine_bytes = head[kEngineBytes]};
  r.samples = DecodeSamples(wire);
  return r;
}

void RemoteRollouts::Cancel() {
  if (in_flight_) (void)Wait();  // a draw cannot be interrupted on the other rank
}

Status RemoteRollouts::SaveSnapshot(const std::string& path) const {
  return SaveSnapshotFile(path, snapshot_, snapshot_delayed_);
}

Status RemoteRollouts::LoadSnapshot(const std::string& path) {
  CHECK(!in_flight_) << "a snapshot load while its rollouts are drawn";
  std::vector<double> delayed;
  RETURN_IF_ERROR(LoadSnapshotFile(path, snapshot_, delayed_ ? &delayed : nullptr));
  if (delayed_ && delayed.size() != snapshot_delayed_.size()) {
    return DataLoss(fmt::format("{}: {} fp8-delayed values, the policy keeps {}", path,
                                delayed.size(), snapshot_delayed_.size()));
  }
  snapshot_delayed_ = std::move(delayed);
  return Status::Ok();
}

Status ServeRollouts(comm::Group& world, int trainer) {
  const std::string setup_text = RecvText(world, trainer, kSetupTag);
  const std::string token_texts = RecvText(world, trainer, kSetupTag);
  Result<Setup> setup = ParseSetup(setup_text, token_texts);
  std::unique_ptr<AsyncRollouts> draws;
  if (setup.ok()) {
    if (!setup->token_texts.empty()) {
      setup->options.token_text = [texts = &setup->token_texts](int32_t t) {
        return t >= 0 && static_cast<size_t>(t) < texts->size() ? (*texts)[t] : std::string("?");
      };
    }
    draws = std::make_unique<AsyncRollouts>(setup->config, setup->forward, setup->options,
                                            setup->quant, setup->threads);
    // Other kernels would give other log-probabilities than the trainer's
    // recomputation (contract 3): refuse rather than report a mismatch.
    const std::string mine =
        draws->ctx().BitsName(model::RunsBf16Gemms(setup->forward.precision, setup->forward.fp8));
    if (mine != setup->kernels) {
      setup = InvalidArgument(fmt::format(
          "runs the {} kernels, the trainer {}: their log-probabilities would differ; run both "
          "with the same ANVIL_ISA and ANVIL_AMX",
          mine, setup->kernels));
      draws.reset();
    }
  }
  SendStatus(world, trainer, kSetupTag, setup.status());
  RETURN_IF_ERROR(setup.status());
  comm::SetWatchdogTimeout(setup->timeout_s);
  while (true) {
    std::array<int64_t, kDrawFields> head{};
    world.Recv(std::span<int64_t>(head), trainer, kDrawTag);
    if (head[kCommand] == kStop) return Status::Ok();
    CHECK_EQ(head[kCommand], kDraw) << "a rollout command from rank " << trainer;
    std::vector<int32_t> words(static_cast<size_t>(head[kPromptWords]));
    world.Recv(std::span<int32_t>(words), trainer, kDrawTag);
    // The snapshot's weights, received in place, and fp8-delayed's scales.
    std::vector<double> delayed;
    if (const model::Fp8DelayedScaling* d = draws->snapshot().fp8_delayed()) {
      delayed.resize(d->Save().size());
    }
    const Status received = draws->SetSnapshot(
        [&](std::span<float> weights) {
          world.Recv(weights, trainer, kDrawTag);
          if (!delayed.empty()) world.Recv(std::span<double>(delayed), trainer, kDrawTag);
          return Status::Ok();
        },
        delayed);
    if (!received.ok()) {  // scales that do not fit: the trainer reports it and ends the run
      SendStatus(world, trainer, kReplyTag, received);
      continue;
    }
    std::vector<std::vector<int32_t>> prompts;
    for (size_t at = 0; at < words.size();) {
      const auto n = static_cast<size_t>(words[at++]);
      CHECK_LE(at + n, words.size()) << "a prompt past the message";
      prompts.emplace_back(words.begin() + static_cast<int64_t>(at),
                           words.begin() + static_cast<int64_t>(at + n));
      at += n;
    }
    CHECK_EQ(static_cast<int64_t>(prompts.size()), head[kPrompts]);
    draws->Start(std::move(prompts), head[kStep], static_cast<int>(head[kStaleness]));
    Result<Rollouts> r = draws->Wait();
    SendStatus(world, trainer, kReplyTag, r.status());
    if (!r.ok()) continue;  // the trainer reports it and ends the run
    std::array<int64_t, kReplyFields> reply{};
    const SamplesWire wire = EncodeSamples(r->samples);
    reply[kSamples] = static_cast<int64_t>(r->samples.size());
    reply[kTokens] = static_cast<int64_t>(wire.tokens.size());
    reply[kPromptTokens] = r->stats.prompt_tokens;
    reply[kNewTokens] = r->stats.new_tokens;
    reply[kSteps] = r->stats.steps;
    reply[kEngineBytes] = r->stats.engine_bytes;
    world.Send(std::span<const int64_t>(reply), trainer, kReplyTag);
    world.Send(std::span<const double>(&r->stats.seconds, 1), trainer, kReplyTag);
    world.Send(std::span<const int64_t>(wire.meta), trainer, kReplyTag);
    world.Send(std::span<const int32_t>(wire.tokens), trainer, kReplyTag);
    world.Send(std::span<const double>(wire.logprobs), trainer, kReplyTag);
  }
}

}  // namespace anvil::rl
