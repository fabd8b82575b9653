// `anvil bench gemm`: anvil's GEMM against OpenBLAS and oneDNN on the same
// shapes in the same run, and against the machine's measured peak.
#pragma once

#include <string>
#include <vector>

namespace anvil::bench {

struct GemmShape {
  long m, n, k;
};

struct GemmBenchOptions {
  std::vector<GemmShape> shapes;          // empty: the default training + decode shapes
  std::vector<std::string> dtypes;        // "f32", "bf16", "fp8", "mxfp8", "w8a8", "w4a8"; empty: f32 and bf16
  int threads = 0;                        // 0: all (ANVIL_THREADS)
  bool peers = true;                      // also run OpenBLAS and oneDNN
  bool json = false;                      // one JSON object per line instead of a table
  double min_seconds = 0.3;               // per case and implementation
  bool quick = false;                     // default shapes without the two largest
};

// Prints the results; returns a process exit code.
int RunGemmBench(const GemmBenchOptions& options);

}  // namespace anvil::bench
