// `anvil probe diff RUN_A RUN_B`: where two runs' numerics part; `anvil probe
// --ckpt DIR --out OUT`: the records of one step on a saved checkpoint and
// batch. Parsing and printing only; the records and the comparison are
// train/probe.h, the checkpoint's step train/checkpoint_probe.h.
#include <fmt/core.h>

#include <cmath>
#include <memory>
#include <string>

#include "anvil/commands.h"
#include "anvil/train/checkpoint_probe.h"
#include "anvil/train/probe.h"

namespace anvil::cli {
namespace {

struct ProbeDiffOptions {
  std::string a, b;
  double tolerance = 1e-3;
  int rows = 12;
};

std::string Stats(const train::ProbeRecord& r) {
  return fmt::format("rms {:.6g}, max {:.6g}{}", r.stats.rms, r.stats.max_abs,
                     r.stats.nan + r.stats.inf > 0
                         ? fmt::format(", {} NaN, {} Inf", r.stats.nan, r.stats.inf)
                         : std::string());
}

int RunDiff(const ProbeDiffOptions& o) {
  auto a = train::ReadProbe(o.a);
  auto b = train::ReadProbe(o.b);
  for (const auto* r : {&a, &b}) {
    if (!r->ok()) {
      fmt::print(stderr, "anvil probe diff: {}\n", r->status().ToString());
      return 2;
    }
  }
  const train::ProbeDiff d = train::DiffProbes(*a, *b, o.tolerance);
  // The distances along the way: the last `rows` entries up to the divergence.
  fmt::print("{:>6} {:>5}  {:<28} {:<16} {:>10}\n", "step", "index", "tensor", "kind", "distance");
  const int64_t from = std::max<int64_t>(0, d.compared - o.rows);
  for (int64_t i = from; i < d.compared; ++i) {
    const train::ProbeRecord& r = (*a)[i];
    fmt::print("{:>6} {:>5}  {:<28} {:<16} {:>10.3g}\n", r.step, r.index, r.name, r.kind,
               d.distances[i]);
  }
  if (d.first_divergence < 0) {
    fmt::print("no divergence beyond {:g} over {} tensors{}\n", o.tolerance, d.compared,
               a->size() != b->size() ? fmt::format(" (the records hold {} and {})", a->size(),
                                                    b->size())
                                      : std::string());
    return 0;
  }
  const train::ProbeRecord& ra = (*a)[d.first_divergence];
  const train::ProbeRecord& rb = (*b)[d.first_divergence];
  if (d.shapes_differ) {
    fmt::print(stderr,
               "anvil probe diff: step {}, {} ({}) holds {} values in {} and {} in {}: the "
               "records are of another model, batch or sequence length, and do not compare\n",
               ra.step, ra.name, ra.kind, ra.stats.count, o.a, rb.stats.count, o.b);
    return 2;
  }
  fmt::print("first divergence: step {}, {} ({}), distance {:.3g} > {:g}\n  {}: {}\n  {}: {}\n",
             ra.step, ra.name, ra.kind, d.distances.back(), o.tolerance, o.a, Stats(ra), o.b,
             Stats(rb));
  return 1;
}

}  // namespace

void AddProbeCommand(CLI::App& app) {
  CLI::App* probe = app.add_subcommand(
      "probe",
      "Numerics records: of a checkpoint on a saved batch (--ckpt), or compared (diff)");
  probe->require_subcommand(0, 1);
  auto c = std::make_shared<train::CheckpointProbeOptions>();
  probe->add_option("--ckpt", c->checkpoint,
                    "Checkpoint folder, run folder (its latest checkpoint) or a `latest` file");
  probe->add_option("--out", c->out_dir, "Folder for probe.jsonl (a run folder for `probe diff`)");
  probe->add_option("--precision", c->precision,
                    "f32, bf16, fp8-tensor, fp8-delayed, fp8-block or mxfp8")
      ->capture_default_str();
  probe->add_option("--tokens", c->tokens_file,
                    "File of token ids (white space between them), cut into rows of seq-len + 1; "
                    "default: the run's first validation windows");
  probe->add_option("--rows", c->rows, "Rows of the batch")->capture_default_str();
  probe->add_option("--seq-len", c->seq_len, "Tokens per row (0: the run's train.seq_len)")
      ->capture_default_str();
  probe->add_option("--probe-fault", c->fault, "NAME=FACTOR: scale one activation (a test)");
  probe->add_option("--threads", c->threads, "Threads (0: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  probe->callback([probe, c] {
    if (!probe->get_subcommands().empty()) return;  // `probe diff`
    if (c->checkpoint.empty()) {
      throw CLI::ValidationError("probe", "give --ckpt DIR --out OUT, or `probe diff RUN_A RUN_B`");
    }
    auto r = train::ProbeCheckpoint(*c);
    if (!r.ok()) {
      fmt::print(stderr, "anvil probe: {}\n", r.status().ToString());
      throw CLI::RuntimeError(1);
    }
    fmt::print("{}: {} records of one step ({} precision, batch loss {:.6f})\n", r->path,
               r->records, c->precision, r->loss);
  });
  auto o = std::make_shared<ProbeDiffOptions>();
  CLI::App* diff = probe->add_subcommand(
      "diff", "Name the first tensor, in execution order, where two runs' numerics part");
  diff->add_option("run_a", o->a, "Run folder with probe.jsonl")->required();
  diff->add_option("run_b", o->b, "Run folder with probe.jsonl")->required();
  diff->add_option("--tolerance", o->tolerance,
                   "Largest relative difference of rms or max |x| that still agrees")
      ->capture_default_str();
  diff->add_option("--rows", o->rows, "Entries shown before the divergence")->capture_default_str();
  diff->footer(
      "Exit status, as diff(1)'s: 0 when the records agree, 1 at a divergence, 2 when they "
      "cannot be compared (missing or malformed, or of another model, batch or sequence length).");
  diff->callback([o] {
    if (const int rc = RunDiff(*o); rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace anvil::cli
