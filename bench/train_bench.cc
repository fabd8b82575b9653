// `anvil bench train` (see train_bench.h). anvil runs its real Trainer::Step
// (data loading, forward/backward, clipping, AdamW) on a synthetic shard of
// random tokens; the peer runs in a child process whose environment gets
// tcmalloc (LD_PRELOAD), OMP_WAIT_POLICY=PASSIVE and no OPENBLAS_CORETYPE /
// OPENBLAS_L2_SIZE, as a tuning PyTorch user would set them.
#include "train_bench.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "anvil/comm/world.h"
#include "anvil/core/clock.h"
#include "anvil/core/config.h"
#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/data/shard.h"
#include "anvil/profile/peak.h"
#include "anvil/train/config.h"
#include "anvil/train/trainer.h"
#include "python_peer.h"

namespace anvil::bench {
namespace {
namespace fs = std::filesystem;

// A shard of uniformly random tokens (a few global batches; the loader wraps).
Status WriteRandomShard(const std::string& path, int64_t vocab, int64_t tokens) {
  ASSIGN_OR_RETURN(data::ShardWriter w, data::ShardWriter::Create(path, static_cast<uint32_t>(vocab)));
  const RngStream rng(42, RngPurpose::kTest);
  std::vector<uint32_t> doc(tokens);
  for (int64_t i = 0; i < tokens; ++i) doc[i] = rng.U32(i) % static_cast<uint32_t>(vocab);
  RETURN_IF_ERROR(w.AddDocument(doc));
  return w.Finish().status();
}

struct Figures {
  double tokens_per_s = 0;
  double mfu = 0;
  int64_t max_rss_bytes = 0;
};

int Fail(const Status& s) {
  fmt::print(stderr, "anvil bench train: {}\n", s.ToString());
  return 1;
}

// The run config of --config with every --set applied.
Result<Config> BenchConfig(const TrainBenchOptions& o) {
  ASSIGN_OR_RETURN(Config config, Config::FromFile(o.config));
  for (const std::string& set : o.sets) RETURN_IF_ERROR(config.Set(set));
  return config;
}

// Runs `cmd`, returns the last JSON object it printed.
Result<nlohmann::json> RunForJson(const std::string& cmd) {
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return Internal("cannot start: " + cmd);
  std::string out;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, got);
  const int rc = ::pclose(pipe);
  const size_t brace = out.rfind("\n{");
  const std::string last = brace == std::string::npos ? out : out.substr(brace + 1);
  nlohmann::json j = nlohmann::json::parse(last, nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.is_object()) {
    return Internal(fmt::format("{} failed (exit {}):\n{}", cmd, rc, out));
  }
  return j;
}

}  // namespace

int RunDataParallelBench(const TrainBenchOptions& o);

int RunTrainBench(const TrainBenchOptions& o) {
  if (o.dp > 1 && !o.dp_worker) return RunDataParallelBench(o);
  const auto fail = Fail;
  auto config = BenchConfig(o);
  if (!config.ok()) return fail(config.status());
  std::shared_ptr<comm::Group> world;
  if (o.dp_worker) {
    auto w = comm::InitWorld();
    if (!w.ok()) return fail(w.status());
    world = *w;
  }
  Config peer_view = *config;  // to read the model keys for the peer
  auto mc = model::ModelConfig::FromConfig(peer_view);
  if (!mc.ok()) return fail(mc.status());
  auto tc = train::TrainConfig::FromConfig(peer_view);
  if (!tc.ok()) return fail(tc.status());
  // "auto" (the configs' default) is the trainer's to resolve: `precision`
  // becomes what it chose, so the peer runs the same one.
  std::string precision = !o.precision.empty() ? o.precision
                          : tc->precision_auto ? std::string("auto")
                                               : std::string(model::PrecisionName(tc->precision));

  const std::string tmp = (fs::temp_directory_path() /
                           fmt::format("anvil_bench_train_{}", ::getpid())).string();
  fs::create_directories(tmp + "/data");
  const int64_t tokens = (tc->batch_size * (tc->seq_len + 1)) * tc->grad_accum * 4 + 1;
  for (const char* split : {"train.bin", "val.bin"}) {
    if (Status s = WriteRandomShard(tmp + "/data/" + split, mc->vocab_size, tokens); !s.ok()) {
      return fail(s);
    }
  }
  for (const std::string& set :
       {fmt::format("data.dir=\"{}\"", tmp + "/data"), fmt::format("train.precision={}", precision),
        fmt::format("train.threads={}", o.threads), std::string("data.shuffle=false")}) {
    if (Status s = config->Set(set); !s.ok()) return fail(s);
  }
  Figures anvil_fig;
  double peak = 0, flops_per_token = mc->FlopsPerToken(tc->seq_len);
  int threads = 0;
  if (o.dp_worker) {
    auto trainer = train::Trainer::Create(
        std::move(*config),
        train::RunOptions{.run_dir = tmp + "/run", .write_metrics = false, .world = world});
    if (!trainer.ok()) {
      fs::remove_all(tmp);
      return fail(trainer.status());
    }
    train::Trainer& t = **trainer;
    for (int i = 0; i < o.warmup; ++i) t.Step();
    double exposed = 0, seconds = 0;
    for (int i = 0; i < o.steps; ++i) {
      const train::StepMetrics m = t.Step();  // seconds: the slowest rank's
      seconds += m.seconds;
      exposed += std::max(0.0, m.exposed_comm_s);  // -1: one process
    }
    // The largest exposed share and resident set over the ranks.
    const double share = world->AllReduceValue(exposed / seconds, comm::ReduceOp::kMax);
    const int64_t rss = world->AllReduceValue<int64_t>(train::PeakRssBytes(), comm::ReduceOp::kMax);
    const train::StateMemory mem = t.state_memory();
    if (world->rank() == 0) {
      nlohmann::ordered_json j;
      j["ranks"] = world->size();
      j["threads_per_rank"] = t.threads();
      j["zero"] = t.parallel_config().zero;
      j["overlap"] = t.parallel_config().overlap;
      j["tokens_per_s"] = static_cast<double>(o.steps * tc->tokens_per_step() * world->size()) / seconds;
      j["exposed_comm_share"] = share;
      j["params"] = mem.params;
      j["state_bytes_rank0"] = mem.total();
      j["adam_bytes_rank0"] = mem.adam;
      j["accumulation_bytes_rank0"] = mem.accumulation;
      j["grad_accum"] = tc->grad_accum;
      j["bf16_copy"] = model::HoldsBf16Weights(tc->precision, t.model().options().fp8);
      j["max_rss_bytes"] = rss;
      fmt::print("{}\n", j.dump());
    }
    trainer->reset();
    fs::remove_all(tmp);
    comm::FinalizeWorld();
    return 0;
  }
  {
    auto trainer = train::Trainer::Create(
        std::move(*config), train::RunOptions{.run_dir = tmp + "/run", .write_metrics = false});
    if (!trainer.ok()) {
      fs::remove_all(tmp);
      return fail(trainer.status());
    }
    train::Trainer& t = **trainer;
    threads = t.threads();
    peak = t.peak_gflops();
    precision = model::PrecisionName(t.train_config().precision);
    if (!o.json) {
      fmt::print("anvil bench train: {} ({:.2f} M params, {:.1f} MFLOP/token), {} x {} x {} "
                 "tokens/step, {}, {} threads, peak {:.0f} GFLOP/s\n",
                 o.config, mc->NumParams() / 1e6, flops_per_token / 1e6, tc->batch_size,
                 tc->seq_len, tc->grad_accum, precision, threads, peak);
      std::fflush(stdout);
    }
    for (int i = 0; i < o.warmup; ++i) t.Step();
    const Stopwatch watch;
    for (int i = 0; i < o.steps; ++i) t.Step();
    const double seconds = watch.Seconds();
    anvil_fig.tokens_per_s = static_cast<double>(o.steps * tc->tokens_per_step()) / seconds;
    anvil_fig.mfu = anvil_fig.tokens_per_s * flops_per_token / (peak * 1e9);
    // The peer runs in a process of its own: this process's high-water mark
    // is anvil's (with the random data, a few MiB).
    anvil_fig.max_rss_bytes = train::PeakRssBytes();
  }
  fs::remove_all(tmp);

  Figures torch_fig;
  std::string peer_name = "pytorch", peer_error, peer_precision = precision;
  if (o.peer) {
    const std::string script =
        o.peer_script.empty() ? PeerScriptPath("torch_train_peer.py") : o.peer_script;
    const nlohmann::json model = PeerModelJson(*mc);
    // PyTorch 1.13 has no FP8 training: an FP8 run is compared with its bf16.
    const auto parsed = model::ParsePrecision(precision);
    peer_precision = parsed.ok() && model::IsFp8(*parsed) ? "bf16" : precision;
    auto j = RunPythonPeer(
        o.python, script,
        fmt::format("--model {} --batch {} --seq {} --accum {} --precision {} --threads {} "
                    "--steps {} --warmup {}",
                    ShellQuote(model.dump()), tc->batch_size, tc->seq_len, tc->grad_accum,
                    peer_precision, threads, o.steps, o.warmup));
    if (j.ok()) {
      torch_fig.tokens_per_s = j->at("tokens_per_s").get<double>();
      torch_fig.mfu = torch_fig.tokens_per_s * flops_per_token / (peak * 1e9);
      peer_name = j->at("peer").get<std::string>();
    } else {
      peer_error = j.status().message();
    }
  }
  const double ratio = torch_fig.tokens_per_s > 0 ? anvil_fig.tokens_per_s / torch_fig.tokens_per_s : 0;
  if (o.json) {
    nlohmann::ordered_json j;
    j["bench"] = "train";
    j["config"] = o.config;
    j["precision"] = precision;
    j["threads"] = threads;
    j["tokens_per_step"] = tc->tokens_per_step();
    j["flops_per_token"] = flops_per_token;
    j["peak_gflops"] = peak;
    j["anvil_tokens_per_s"] = anvil_fig.tokens_per_s;
    j["anvil_mfu"] = anvil_fig.mfu;
    j["anvil_max_rss_bytes"] = anvil_fig.max_rss_bytes;
    if (o.peer) {
      j["peer"] = peer_name;
      j["peer_precision"] = peer_precision;
      j["peer_tokens_per_s"] = torch_fig.tokens_per_s;
      j["peer_mfu"] = torch_fig.mfu;
      j["anvil_over_peer"] = ratio;
      if (!peer_error.empty()) j["peer_error"] = peer_error;
    }
    fmt::print("{}\n", j.dump());
  } else {
    fmt::print("{:<22} {:>12} {:>8}\n", "", "tokens/s", "MFU");
    fmt::print("{:<22} {:>12.0f} {:>7.1f}%   memory high-water {:.0f} MiB\n", "anvil " + precision,
               anvil_fig.tokens_per_s, 100 * anvil_fig.mfu,
               static_cast<double>(anvil_fig.max_rss_bytes) / (1 << 20));
    if (o.peer) {
      if (peer_error.empty()) {
        fmt::print("{:<22} {:>12.0f} {:>7.1f}%\n", peer_name + " " + peer_precision,
                   torch_fig.tokens_per_s, 100 * torch_fig.mfu);
        fmt::print("anvil / pytorch        {:>12.2f}x\n", ratio);
      } else {
        fmt::print("pytorch: {}\n", peer_error);
      }
    }
  }
  return peer_error.empty() ? 0 : 1;
}

// The comparison of train_bench.h: a baseline in this process, each case in
// an mpirun child running this binary as a worker.
int RunDataParallelBench(const TrainBenchOptions& o) {
  const auto fail = Fail;
  auto config = BenchConfig(o);
  if (!config.ok()) return fail(config.status());
  auto tc = train::TrainConfig::FromConfig(*config);
  if (!tc.ok()) return fail(tc.status());
  if (tc->grad_accum % o.dp != 0) {
    return fail(InvalidArgument(fmt::format(
        "train.grad_accum = {} does not divide over --dp {} ranks: the cases must share the "
        "global batch (set train.grad_accum to a multiple of {})",
        tc->grad_accum, o.dp, o.dp)));
  }
  // One precision for every case: "auto" is resolved here, once (each case
  // measuring the peaks for itself could pick another); f32 by default.
  std::string precision = o.precision.empty() ? "f32" : o.precision;
  if (precision == "auto") {
    ThreadPool pool(o.dp);
    precision = model::PrecisionName(train::AutoPrecision(profile::MeasurePeakFlops(pool)));
  }
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::string common = fmt::format("--config {} --precision {} --steps {} --warmup {} --json",
                                   ShellQuote(o.config), precision, o.steps, o.warmup);
  for (const std::string& set : o.sets) common += " --set " + ShellQuote(set);
  std::vector<nlohmann::json> rows;
  // Baseline: one rank with every thread, the config's micro-batches.
  const std::string base_cmd = fmt::format(
      "{} bench train {} --threads {} --dp-worker --dp 1 --set parallel.zero=0", ShellQuote(self),
      common, o.dp);
  const std::string mpirun = fmt::format(
      "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np {} --oversubscribe "
      "--bind-to none",
      o.dp);
  struct Case {
    std::string name;
    std::string cmd;
  };
  std::vector<Case> cases = {{fmt::format("1 rank x {} threads", o.dp), base_cmd}};
  // Overlap on and off for the bucketed stages; ZeRO-2/3 reduce each unit as
  // its backward ends (parallel.overlap does not apply).
  const std::pair<int, bool> stages[] = {{0, true}, {0, false}, {1, true}, {1, false}, {2, true}, {3, true}};
  for (const auto& [zero, overlap] : stages) {
    cases.push_back(
        {fmt::format("{} ranks x 1, ZeRO-{}{}", o.dp, zero, overlap ? "" : ", no overlap"),
         fmt::format("{} {} bench train {} --threads 1 --dp-worker --dp {} --set parallel.zero={} "
                     "--set parallel.overlap={} --set train.grad_accum={}",
                     mpirun, ShellQuote(self), common, o.dp, zero, overlap ? "true" : "false",
                     tc->grad_accum / o.dp)});
  }
  if (!o.json) {
    fmt::print("anvil bench train --dp {}: {} ({}), global batch {} x {} x {} rows, {} timed steps\n",
               o.dp, o.config, precision, tc->batch_size, tc->seq_len, tc->grad_accum, o.steps);
    fmt::print("{:<32} {:>10} {:>9} {:>9} {:>12} {:>12} {:>10}\n", "", "tokens/s", "vs 1 rank",
               "exposed", "state/rank", "formula", "max RSS");
  }
  double base = 0;
  for (const Case& c : cases) {
    auto j = RunForJson(c.cmd);
    if (!j.ok()) return fail(j.status());
    const double tps = (*j)["tokens_per_s"].get<double>();
    if (base == 0) base = tps;
    // The ZeRO paper's model-state bytes per rank, in anvil's precisions:
    // f32 weights 4Ψ (and a bf16 copy 2Ψ, in bf16 and the FP8 recipes that
    // keep GEMMs in bf16; / ranks under ZeRO-3, which keeps
    // no copy), f32 grads 4Ψ (none from ZeRO-2), AdamW m and v 8Ψ (/ ranks
    // from ZeRO-1), and the f32 gradient sum 4Ψ where a rank accumulates
    // micro-batches or from ZeRO-2 (/ ranks from ZeRO-1). Measured: the
    // buffers allocated, which add ZeRO-2/3's unit slots (the gather buffers).
    const double psi = static_cast<double>((*j)["params"].get<int64_t>());
    const int ranks = (*j)["ranks"].get<int>(), zero = (*j)["zero"].get<int>();
    const double shards = zero >= 1 ? ranks : 1;
    const bool copy = (*j)["bf16_copy"].get<bool>();
    const double weights = zero == 3 ? psi * 4 / ranks : psi * (4 + (copy ? 2 : 0));
    const double grads = zero >= 2 ? 0 : psi * 4;
    const bool sum = (*j)["grad_accum"].get<int64_t>() > 1 || zero >= 2;
    const double formula = weights + grads + psi * 8 / shards + (sum ? psi * 4 / shards : 0);
    (*j)["case"] = c.name;
    (*j)["vs_one_rank"] = tps / base;
    (*j)["formula_bytes"] = formula;
    if (o.json) {
      fmt::print("{}\n", j->dump());
    } else {
      fmt::print("{:<32} {:>10.0f} {:>8.2f}x {:>8.1f}% {:>9.1f} MB {:>9.1f} MB {:>7.0f} MB\n", c.name,
                 tps, tps / base, 100 * (*j)["exposed_comm_share"].get<double>(),
                 (*j)["state_bytes_rank0"].get<int64_t>() / 1e6, formula / 1e6,
                 (*j)["max_rss_bytes"].get<int64_t>() / 1e6);
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace anvil::bench
