// `anvil bench gemm`: GEMM throughput vs OpenBLAS, oneDNN and the measured peak.
#include <cstdio>
#include <memory>

#include "anvil/commands.h"
#include "gemm_bench.h"

namespace anvil::cli {
namespace {

// "4096x768x768" -> {m, n, k}.
bench::GemmShape ParseShape(const std::string& text) {
  bench::GemmShape s{};
  if (std::sscanf(text.c_str(), "%ldx%ldx%ld", &s.m, &s.n, &s.k) != 3 || s.m <= 0 || s.n <= 0 ||
      s.k <= 0) {
    throw CLI::ValidationError("--shape", "expected MxNxK with positive sizes, got '" + text + "'");
  }
  return s;
}

}  // namespace

void AddBenchGemm(CLI::App& bench) {
  auto options = std::make_shared<bench::GemmBenchOptions>();
  auto shapes = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = bench.add_subcommand("gemm", "GEMM GFLOP/s vs OpenBLAS, oneDNN and the peak");
  cmd->add_option("--shape", *shapes, "MxNxK (repeatable); default: training and decode shapes");
  cmd->add_option("--dtype", options->dtypes,
                  "f32, bf16, fp8 (DeepSeek-V3 blocks), mxfp8, w8a8 or w4a8 (repeatable); "
                  "default: f32 and bf16. FP8 runs without peers, decoded to the machine's "
                  "faster dot product, B packed once up to 64 rows (as decoding keeps an FP8 "
                  "model's weights); w8a8/w4a8 with activations quantized per call, w8a8 "
                  "beside oneDNN's int8 matmul")
      ->check(CLI::IsMember({"f32", "bf16", "fp8", "mxfp8", "w8a8", "w4a8"}));
  cmd->add_option("--threads", options->threads, "Threads (default: ANVIL_THREADS or all)")
      ->check(ThreadsRange());
  cmd->add_flag("!--no-peers", options->peers, "Skip OpenBLAS and oneDNN");
  cmd->add_flag("--json", options->json, "One JSON object per line");
  cmd->add_flag("--quick", options->quick, "Default shapes without the two largest");
  cmd->add_option("--min-seconds", options->min_seconds, "Minimum timing per case")
      ->check(CLI::PositiveNumber);
  cmd->callback([options, shapes] {
    for (const std::string& s : *shapes) options->shapes.push_back(ParseShape(s));
    if (const int rc = bench::RunGemmBench(*options); rc != 0) throw CLI::RuntimeError(rc);
  });
}


}  // namespace anvil::cli
