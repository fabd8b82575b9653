// The machine's measured compute and memory peaks: the denominators of every
// MFU and bandwidth fraction anvil reports.
//
// How they are measured: each thread runs a loop of independent vector FMAs
// (f32: vfmadd231ps; bf16: vdpbf16ps, 2 multiply-adds per f32 lane and pair)
// over 16 accumulators — more than latency x issue width on current cores, so
// the FMA pipes never wait — for a fixed number of iterations; the best of
// several short trials counts, the f32 and bf16 trials taken in turn (load
// from other processes then slows both alike). FLOPs count a multiply-add
// as two. Memory: each thread sums its half of a 256 MiB buffer (far larger
// than any cache) with vector loads; GB/s counts bytes read. Without AVX-512
// the f32 peak uses AVX2; without AVX512_BF16 there is no bf16 dot
// instruction and bf16 math runs as f32, so the bf16 peak is reported as the
// f32 peak. Where bf16 GEMMs run on AMX tiles (AmxEnabled()), the bf16 peak
// is theirs: a loop of independent tdpbf16ps on four accumulator tiles
// (16 x 16 x 32 multiply-adds each), operands in tile registers.
#pragma once

#include "anvil/core/cpu_features.h"
#include "anvil/core/thread_pool.h"

namespace anvil::profile {

struct PeakFlops {
  double f32_gflops = 0;  // FMA throughput
  // What bf16 GEMMs (and FP8 ones decoded to bf16) run at: AMX tiles where
  // used (amx), else the bf16 dot product (= f32 when there is no bf16 dot).
  double bf16_gflops = 0;
  double bf16_dot_gflops = 0;  // vdpbf16ps (= f32 without it), AMX or not
  bool bf16_native = false;
  bool amx = false;
  Isa isa = Isa::kScalar;  // the tier the f32 loop used
};

// "auto" precision picks bf16 where bf16_gflops exceeds f32_gflops by this
// ratio (bf16_native machines only).
inline constexpr double kBf16ChoiceRatio = 1.25;

// Measures on every thread of `pool` at once (pool.size() == 1: one core).
PeakFlops MeasurePeakFlops(ThreadPool& pool);

// Sustained DRAM read bandwidth in GB/s (1e9 bytes/s) on all threads of `pool`.
double MeasureReadBandwidth(ThreadPool& pool);

namespace detail {
// Per-ISA inner loops: run `iterations` rounds and return the FLOPs done.
double FmaLoopAvx512(long iterations);
double Bf16DotLoopAvx512(long iterations);
double Bf16TileLoopAmx(long iterations);
double FmaLoopAvx2(long iterations);
double ReadSumAvx512(const float* data, long n);
double ReadSumAvx2(const float* data, long n);
}  // namespace detail

}  // namespace anvil::profile
