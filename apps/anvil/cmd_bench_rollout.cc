// `anvil bench rollout`: the rollout engine's tokens/s at several batch sizes
// on a checkpoint (random prompts, no eos, every sample max_new tokens long),
// beside PyTorch's batched KV-cache generation of the same model shape, batch
// and thread count (bench/torch_rollout_peer.py, in its own process), in f32,
// or under bf16 autocast when anvil runs bf16 (or FP8).
#include <fmt/core.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "anvil/commands.h"
#include "anvil/infer/checkpoint_model.h"
#include "anvil/infer/rollout.h"
#include "anvil/kernels/attention.h"
#include "anvil/profile/trace.h"
#include "python_peer.h"

namespace anvil::cli {
namespace {

struct BenchRolloutOptions {
  std::string checkpoint;
  std::string precision = "f32";
  std::vector<int64_t> batches = {1, 8, 32, 64};
  int64_t prompt_len = 32;
  int64_t max_new = 64;
  int64_t rounds = 2;  // prompts per batch slot
  int samples = 1;     // G per prompt
  int64_t page_rows = 0;
  int threads = 0;
  bool peer = true;
  std::string python = "/usr/bin/python3";
  std::string trace;  // Chrome trace of each batch size's first timed run, or empty
  int repeat = 1;     // timed runs a batch size (each beside a peer run)
};

// PyTorch 1.13 has no FP8: an FP8 rollout is compared with bf16 autocast.
std::string PeerPrecision(const std::string& precision) {
  return precision == "f32" ? "f32" : "bf16";
}

// The peer's new tokens/s, or its error.
Result<double> PeerTokensPerSecond(const BenchRolloutOptions& o, const model::ModelConfig& c,
                                   int64_t batch, int threads) {
  const nlohmann::json model = bench::PeerModelJson(c);
  ASSIGN_OR_RETURN(const nlohmann::json j,
                   bench::RunPythonPeer(
                       o.python, bench::PeerScriptPath("torch_rollout_peer.py"),
                       fmt::format("--model {} --batch {} --prompt-len {} --max-new {} "
                                   "--rounds {} --threads {} --precision {}",
                                   bench::ShellQuote(model.dump()), batch, o.prompt_len,
                                   o.max_new, o.rounds, threads, PeerPrecision(o.precision))));
  return j.at("tokens_per_s").get<double>();
}

// The median (the mean of the middle two for an even count).
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// --trace's file for one batch size: PATH itself, or with several batch
// sizes PATH with "-b<batch>" before its extension.
std::string TracePath(const std::string& path, int64_t batch, bool several) {
  if (!several) return path;
  // The extension: a dot past the file name's first character (".trace" has none).
  const size_t dot = path.rfind('.');
  const size_t name = path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1;
  const bool has_ext = dot != std::string::npos && dot > name;
  return has_ext ? fmt::format("{}-b{}{}", path.substr(0, dot), batch, path.substr(dot))
                 : fmt::format("{}-b{}", path, batch);
}

int Run(const BenchRolloutOptions& o) {
  if (o.page_rows % kernels::kAttentionKvBlock != 0) {
    fmt::print(stderr, "anvil bench rollout: --page-rows {} is not a multiple of {}\n", o.page_rows,
               kernels::kAttentionKvBlock);
    return 1;
  }
  auto precision = model::ParsePrecision(o.precision);
  if (!precision.ok()) {
    fmt::print(stderr, "anvil bench rollout: {}\n", precision.status().ToString());
    return 1;
  }
  auto m = infer::LoadInferenceModel(o.checkpoint, *precision, o.threads);
  if (!m.ok()) {
    fmt::print(stderr, "anvil bench rollout: {}\n", m.status().ToString());
    return 1;
  }
  if (o.prompt_len < 1 || o.prompt_len + o.max_new > m->config.max_seq_len) {
    fmt::print(stderr, "anvil bench rollout: prompt {} + max_new {} must fit max_seq_len {}\n",
               o.prompt_len, o.max_new, m->config.max_seq_len);
    return 1;
  }
  fmt::print(
      "{} ({} precision), {} threads; prompts of {} tokens, {} sample{} each of {} new "
      "tokens; KV cache {}{}\n",
      m->info.dir, o.precision, m->ctx->threads(), o.prompt_len, o.samples,
      o.samples == 1 ? "" : "s", o.max_new,
      o.page_rows > 0 ? fmt::format("paged ({} positions a page)", o.page_rows)
                      : std::string("contiguous"),
      o.repeat > 1 ? fmt::format("; {} timed runs a batch size", o.repeat) : std::string());
  fmt::print("{:>6} {:>8} {:>10} {:>12} {:>12}{}\n", "batch", "samples", "seconds", "new tok/s",
             "prefill tok",
             o.peer ? fmt::format(" {:>14} {:>8}", "pytorch " + PeerPrecision(o.precision), "ratio")
                    : "");
  for (const int64_t batch : o.batches) {
    std::mt19937 rng(static_cast<uint32_t>(batch));
    std::vector<std::vector<int32_t>> prompts((batch * o.rounds + o.samples - 1) / o.samples);
    for (auto& p : prompts) {
      p.resize(o.prompt_len);
      for (int32_t& t : p) t = static_cast<int32_t>(rng() % m->config.vocab_size);
    }
    infer::RolloutEngine engine(m->forward_weights(),
                                {.max_batch = batch,
                                 .max_new = o.max_new,
                                 .samples = o.samples,
                                 .eos = -1,
                                 .sampling = {.temperature = 1.0, .top_k = 0, .top_p = 1.0},
                                 .page_rows = o.page_rows});
    const std::vector<std::vector<int32_t>> warm(
        prompts.begin(), prompts.begin() + std::min<int64_t>(static_cast<int64_t>(prompts.size()),
                                                             (batch + o.samples - 1) / o.samples));
    // --repeat: anvil and the peer in turn, so both meet the host's same
    // moments; medians, and the median of the paired ratios.
    std::vector<double> ours, seconds, theirs, ratios;
    std::string peer_error, trace_note;
    size_t samples = 0;
    int64_t prompt_tokens = 0;
    for (int rep = 0; rep < o.repeat; ++rep) {
      // One untimed batch before each timed one, as the peer warms up in each
      // of its runs: the engine's pages (KV cache, logits, packed weights) are
      // touched, and back in the caches after a peer run, as in an RL run that
      // generates with one engine every step.
      if (auto w = engine.Generate(*m->ctx, warm); !w.ok()) {
        fmt::print(stderr, "anvil bench rollout: {}\n", w.status().ToString());
        return 1;
      }
      const bool traced = !o.trace.empty() && rep == 0;
      infer::RolloutStats stats;
      if (traced) profile::Tracer::Start();
      auto r = engine.Generate(*m->ctx, prompts, &stats);
      if (traced) {
        profile::Tracer::Stop();
        const std::string path = TracePath(o.trace, batch, o.batches.size() > 1);
        if (Status w = profile::Tracer::WriteChromeJson(path); !w.ok()) {
          fmt::print(stderr, "anvil bench rollout: {}\n", w.ToString());
          return 1;
        }
        trace_note = fmt::format("  (trace: {})", path);
      }
      if (!r.ok()) {
        fmt::print(stderr, "anvil bench rollout: {}\n", r.status().ToString());
        return 1;
      }
      samples = r->size();
      prompt_tokens = stats.prompt_tokens;
      ours.push_back(stats.new_tokens / std::max(stats.seconds, 1e-9));
      seconds.push_back(stats.seconds);
      if (o.peer && peer_error.empty()) {
        const auto torch = PeerTokensPerSecond(o, m->config, batch, m->ctx->threads());
        if (torch.ok()) {
          theirs.push_back(*torch);
          ratios.push_back(ours.back() / *torch);
        } else {
          peer_error = torch.status().message();
        }
      }
    }
    std::string peer;
    if (!peer_error.empty()) {
      peer = fmt::format("  pytorch: {}", peer_error);
    } else if (o.peer) {
      peer = fmt::format(" {:>14.0f} {:>7.2f}x", Median(theirs), Median(ratios));
    }
    fmt::print("{:>6} {:>8} {:>10.2f} {:>12.0f} {:>12}{}{}\n", batch, samples, Median(seconds),
               Median(ours), prompt_tokens, peer, trace_note);
    if (o.repeat > 1) {
      std::string runs;
      for (size_t i = 0; i < ours.size(); ++i) {
        runs += i < theirs.size() ? fmt::format(" {:.0f}/{:.0f}", ours[i], theirs[i])
                                  : fmt::format(" {:.0f}", ours[i]);
      }
      fmt::print("{:>6} runs (anvil{}):{}\n", "", theirs.empty() ? "" : "/pytorch", runs);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

void AddBenchRollout(CLI::App& bench) {
  auto o = std::make_shared<BenchRolloutOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "rollout", "Rollout engine tokens/s (continuous batching) at several batch sizes");
  cmd->add_option("--ckpt", o->checkpoint, "Checkpoint folder or run folder")->required();
  cmd->add_option("--precision", o->precision, "f32, bf16 or an FP8 recipe")->capture_default_str();
  cmd->add_option("--batch", o->batches, "Sequences decoded together (repeatable)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens")->capture_default_str();
  cmd->add_option("--max-new", o->max_new, "New tokens per sample")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--rounds", o->rounds, "Prompts per batch slot")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "Samples per prompt (G)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--page-rows", o->page_rows,
                  "Paged KV cache with pages of this many positions (a multiple of 64; 0: "
                  "contiguous); a prompt's samples share its prefill")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads (0: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  cmd->add_flag("!--no-peer", o->peer, "Skip the PyTorch KV-cache generation peer");
  cmd->add_option("--python", o->python, "Python with PyTorch for the peer")->capture_default_str();
  cmd->add_option("--repeat", o->repeat,
                  "Timed runs of each batch size, anvil and the peer in turn; medians, and the "
                  "median of the paired ratios")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--trace", o->trace,
                  "Write a Chrome trace of each batch size's first timed run to this file "
                  "(several batch sizes: -b<batch> before its extension); that run's "
                  "tokens/s include the tracing's cost");
  cmd->callback([o] {
    if (const int rc = Run(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
