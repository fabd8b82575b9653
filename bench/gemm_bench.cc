// `anvil bench gemm`: anvil's GEMM against OpenBLAS and oneDNN on the same
// shapes, inputs and thread count in one process, with GFLOP/s, the fraction
// of the measured peak, and B's bytes per second (the weights: what bounds
// decode shapes). Timings are medians (bench/timing.h).
#include "gemm_bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/gemm.h"
#include "anvil/kernels/gemm_int.h"
#include "anvil/kernels/quant.h"
#include "anvil/profile/peak.h"
#include "peers/onednn.h"
#include "peers/openblas.h"
#include "timing.h"

namespace anvil::bench {
namespace {

// Training forward (NN, B = W[in, out]) of a 768-wide model with 4096
// tokens: attention/MLP projections, the vocabulary head, a larger layer;
// then decode (1..64 tokens against the same weights).
const GemmShape kTrainingShapes[] = {
    {4096, 768, 768}, {4096, 3072, 768}, {4096, 768, 3072}, {4096, 32000, 768}, {8192, 4096, 1024},
};
const GemmShape kDecodeShapes[] = {{1, 768, 768}, {8, 768, 768}, {64, 768, 768}, {1, 3072, 768}};

// One case's operands: first-touched and filled once, outside any timing.
struct Operands {
  AlignedBuffer a, b, c;
  Operands(const GemmShape& s, bool bf16)
      : a(s.m * s.k * (bf16 ? 2 : 4)), b(s.k * s.n * (bf16 ? 2 : 4)), c(s.m * s.n * 4) {
    Fill(a, s.m * s.k, bf16, 1);
    Fill(b, s.k * s.n, bf16, 2);
    std::memset(c.data(), 0, c.size());
  }
  static void Fill(AlignedBuffer& buf, int64_t n, bool bf16, uint32_t step) {
    const RngStream rng(2024, RngPurpose::kTest, step);
    for (int64_t i = 0; i < n; ++i) {
      const float x = 2.0f * rng.Uniform(i) - 1.0f;
      if (bf16) {
        reinterpret_cast<BF16*>(buf.data())[i] = ToBF16(x);
      } else {
        reinterpret_cast<float*>(buf.data())[i] = x;
      }
    }
  }
};

// FP8 calls of at most this many rows time GemmFp8 with B packed once
// (kernels::PackedFp8B), as an FP8 model decodes.
constexpr int64_t kFp8PackedOnceRows = 64;

// FP8 operands quantized once from f32 ones, outside any timing: "fp8" is
// DeepSeek-V3's layout (A in 1 x 128 row blocks, B [k, n] in 128 x 128
// tiles), "mxfp8" MX blocks of 32 along K on both (B stored [n, k]).
struct Fp8Operands {
  std::vector<uint8_t> qa, qb, ea, eb;
  std::vector<float> sa, sb;
  kernels::Fp8Operand a, b;
  kernels::GemmArgs args;
  Fp8Operands(const kernels::KernelCtx& ctx, const GemmShape& s, bool mx)
      : qa(s.m * s.k),
        qb(s.k * s.n),
        ea(s.m * (s.k / 32 + 1)),
        eb(s.n * (s.k / 32 + 1)),
        sa(s.m * (s.k / 128 + 1)),
        sb((s.k / 128 + 1) * (s.n / 128 + 1)) {
    AlignedBuffer fa(s.m * s.k * 4), fb(s.k * s.n * 4);
    Operands::Fill(fa, s.m * s.k, false, 1);
    Operands::Fill(fb, s.k * s.n, false, 2);
    const auto* xa = reinterpret_cast<const float*>(fa.data());
    const auto* xb = reinterpret_cast<const float*>(fb.data());
    args = {.m = s.m, .n = s.n, .k = s.k};
    if (mx) {
      const kernels::BlockQuant q{kernels::Fp8Format::kE4M3, kernels::BlockScale::kMxOcp, 32};
      kernels::QuantizeRows(ctx, s.m, s.k, xa, q, qa.data(), {.e8m0 = ea.data()});
      kernels::QuantizeColumnsTransposed(ctx, s.k, s.n, xb, q, qb.data(), {.e8m0 = eb.data()});
      a = {.data = qa.data(), .scaling = kernels::Fp8Scaling::kMx, .e8m0 = ea.data(), .block = 32};
      b = {.data = qb.data(), .scaling = kernels::Fp8Scaling::kMx, .e8m0 = eb.data(), .block = 32};
      args.trans_b = kernels::Trans::kT;
    } else {
      const kernels::BlockQuant q{kernels::Fp8Format::kE4M3, kernels::BlockScale::kAmax, 128};
      kernels::QuantizeRows(ctx, s.m, s.k, xa, q, qa.data(), {.f32 = sa.data()});
      kernels::QuantizeTiles(ctx, s.k, s.n, xb, kernels::Fp8Format::kE4M3, 128, qb.data(),
                             sb.data());
      a = {.data = qa.data(), .scaling = kernels::Fp8Scaling::kRowBlocks, .scales = sa.data()};
      b = {.data = qb.data(), .scaling = kernels::Fp8Scaling::kTiles, .scales = sb.data()};
    }
  }
};

struct ShapeResult {
  GemmShape shape;
  std::string dtype;
  double gflops = 0;
  double peak_fraction = 0;
  double gbs = 0;  // bytes of B / time
  std::optional<double> openblas, onednn;
};

// Idle OpenBLAS and OpenMP (oneDNN) workers spin for a while after a call;
// let them park before anvil's next timing so they do not steal its cores.
void LetPeersPark() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

std::string Json(const ShapeResult& r, int threads, const std::string& core, const std::string& isa,
                 double dram) {
  auto opt = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.1f}", *v) : std::string("null");
  };
  return fmt::format(
      "{{\"m\":{},\"n\":{},\"k\":{},\"dtype\":\"{}\",\"threads\":{},\"gflops\":{:.1f},"
      "\"peak_fraction\":{:.3f},\"openblas_gflops\":{},\"onednn_gflops\":{},"
      "\"openblas_core\":\"{}\",\"onednn_isa\":\"{}\",\"gbs\":{:.1f},\"dram_fraction\":{:.3f}}}",
      r.shape.m, r.shape.n, r.shape.k, r.dtype, threads, r.gflops, r.peak_fraction, opt(r.openblas),
      opt(r.onednn), core, isa, r.gbs, dram > 0 ? r.gbs / dram : 0.0);
}

}  // namespace

int RunGemmBench(const GemmBenchOptions& options) {
  const int threads = options.threads > 0 ? options.threads : DefaultThreadCount();
  ThreadPool pool(threads);
  const kernels::KernelCtx ctx(pool);
  std::vector<GemmShape> shapes = options.shapes;
  if (shapes.empty()) {
    // --quick drops the two largest training shapes (most of the run time).
    shapes.assign(std::begin(kTrainingShapes), std::end(kTrainingShapes) - (options.quick ? 2 : 0));
    shapes.insert(shapes.end(), std::begin(kDecodeShapes), std::end(kDecodeShapes));
  }
  std::vector<std::string> dtypes = options.dtypes;
  if (dtypes.empty()) dtypes = {"f32", "bf16"};

  if (!options.json) fmt::print("measuring peaks on {} thread(s)...\n", threads);
  const profile::PeakFlops peak = profile::MeasurePeakFlops(pool);
  const double dram = profile::MeasureReadBandwidth(pool);

  std::unique_ptr<OpenBlas> blas;
  std::string core = "none", isa = "none";
  if (options.peers) {
    std::string error;
    // With anvil's tier lowered to AVX2 on a bigger CPU (ANVIL_ISA=avx2), the
    // peers are held to AVX2 too: the comparison is of code for one tier.
    const bool cap = ctx.isa() == Isa::kAvx2 && IsaSupported(Isa::kAvx512);
    blas = OpenBlas::Load(threads, &error, cap);
    if (blas) {
      core = blas->core_name();
    } else {
      fmt::print(stderr, "OpenBLAS peer skipped: {}\n", error);
    }
    SetOneDnnThreads(threads);
    if (cap) CapOneDnnToAvx2();
    isa = OneDnnIsa();
    LetPeersPark();  // OpenBLAS starts its threads as it loads
  }
  // A peer that cannot run a dtype here (oneDNN 2.x has no bf16 matmul on
  // AVX2) fails on every shape alike: said once, its column then reads "-".
  std::vector<std::string> peer_errors;
  auto report_peer_error = [&](const std::string& error, const std::string& dtype) {
    if (std::find(peer_errors.begin(), peer_errors.end(), error) != peer_errors.end()) return;
    peer_errors.push_back(error);
    fmt::print(stderr, "{} ({}: the peer is left out wherever it fails so)\n", error, dtype);
  };
  if (!options.json) {
    fmt::print(
        "anvil isa {}{}, threads {}; peak f32 {:.0f} GFLOP/s, bf16 {:.0f} GFLOP/s; DRAM read "
        "{:.1f} GB/s\npeers: OpenBLAS core {}, oneDNN isa {}\n",
        IsaName(ctx.isa()), ctx.amx() ? " with AMX bf16" : "", threads, peak.f32_gflops,
        peak.bf16_gflops, dram, core, isa);
    fmt::print("{:>22} {:>5} {:>9} {:>6} {:>9} {:>9} {:>7} {:>8} {:>6}\n", "m x n x k", "dtype",
               "GFLOP/s", "peak", "OpenBLAS", "oneDNN", "vs best", "B GB/s", "DRAM");
  }
  // FP8 values meet in the faster of the two dot products (as training picks).
  const bool fp8_bf16 = peak.bf16_native && peak.bf16_gflops > 1.25 * peak.f32_gflops;
  for (const std::string& dtype : dtypes) {
    const bool bf16 = dtype == "bf16";
    for (const GemmShape& s : shapes) {
      // FP8 and W4A8 run alone: no peer multiplies FP8 or int4 x int8 on a
      // CPU; they and W8A8 are measured against anvil's bf16 in the same run,
      // W8A8 also against oneDNN's int8 matmul where peers run (`onednn`).
      auto report_alone = [&](double seconds, double peak_gflops, double b_bytes,
                              std::optional<double> onednn = std::nullopt) {
        ShapeResult r;
        r.shape = s;
        r.dtype = dtype;
        r.gflops = 2.0 * s.m * s.n * s.k / seconds * 1e-9;
        r.peak_fraction = r.gflops / peak_gflops;
        r.gbs = b_bytes / seconds * 1e-9;
        r.onednn = onednn;
        if (options.json) {
          fmt::print("{}\n", Json(r, threads, core, isa, dram));
        } else {
          fmt::print("{:>22} {:>5} {:9.1f} {:5.0f}% {:>9} {:>9} {:>7} {:8.1f} {:5.0f}%\n",
                     fmt::format("{}x{}x{}", s.m, s.n, s.k), dtype, r.gflops, 100 * r.peak_fraction,
                     "-", onednn ? fmt::format("{:.1f}", *onednn) : "-",
                     onednn ? fmt::format("{:.2f}x", r.gflops / *onednn) : "-", r.gbs,
                     100 * r.gbs / dram);
        }
        std::fflush(stdout);
      };
      if (dtype == "fp8" || dtype == "mxfp8") {
        const Fp8Operands f(ctx, s, dtype == "mxfp8");
        AlignedBuffer c_memory(s.m * s.n * 4);  // aligned as Operands' C
        float* c = reinterpret_cast<float*>(c_memory.data());
        const auto decode = fp8_bf16 ? kernels::Fp8Decode::kBf16 : kernels::Fp8Decode::kF32;
        // Up to kFp8PackedOnceRows rows (decoding, rollouts) B is packed once
        // outside the timing, as the decoder keeps an FP8 model's weights
        // (B read as its decoded panels, or for a few rows as its codes
        // streamed); more rows (training, whose weights change every step)
        // decode B in each call (B read as its codes).
        const bool pack_once = s.m <= kFp8PackedOnceRows;
        const kernels::PackedFp8B packed =
            pack_once ? kernels::PackedFp8B(ctx, f.args, f.a, f.b, decode) : kernels::PackedFp8B();
        const Timing t = TimeMedian(
            [&] {
              if (pack_once) {
                kernels::GemmFp8(ctx, f.args, f.a, packed, c);
              } else {
                kernels::GemmFp8(ctx, f.args, f.a, f.b, c, decode);
              }
            },
            options.min_seconds);
        const bool panels = pack_once && !packed.Streams(s.m);
        const double b_bytes = static_cast<double>(s.k * s.n) * (panels ? (fp8_bf16 ? 2 : 4) : 1);
        report_alone(t.median_seconds, fp8_bf16 ? peak.bf16_gflops : peak.f32_gflops, b_bytes);
        continue;
      }
      if (dtype == "w8a8" || dtype == "w4a8") {
        // Weights quantized once outside the timing; each call quantizes its
        // activations (dynamic, per row) as inference does. Peak: f32's.
        AlignedBuffer fa(s.m * s.k * 4), fb(s.k * s.n * 4);
        Operands::Fill(fa, s.m * s.k, false, 1);
        Operands::Fill(fb, s.k * s.n, false, 2);
        const kernels::IntWeights w = kernels::QuantizeWeightsInt(
            ctx, s.k, s.n, reinterpret_cast<const float*>(fb.data()), 0,
            dtype == "w8a8" ? kernels::IntBits::kInt8 : kernels::IntBits::kInt4);
        AlignedBuffer rows(kernels::IntRowsBytes(s.m, s.k));
        AlignedBuffer y(s.m * s.n * 4);  // aligned as Operands' C
        const Timing t = TimeMedian(
            [&] {
              const kernels::IntRows a = kernels::QuantizeRowsInt8(
                  ctx, s.m, s.k, reinterpret_cast<const float*>(fa.data()), 0, rows.data(), &w);
              kernels::GemmInt(ctx, a, w, reinterpret_cast<float*>(y.data()), 0, false);
            },
            options.min_seconds);
        std::optional<double> onednn;
        if (options.peers && dtype == "w8a8") {
          // The peer's operands: codes of the same sizes (its speed does not
          // depend on their values).
          std::vector<uint8_t> qa(s.m * s.k);
          std::vector<int8_t> qb(s.k * s.n);
          for (size_t i = 0; i < qa.size(); ++i) qa[i] = static_cast<uint8_t>(i * 37 % 251);
          for (size_t i = 0; i < qb.size(); ++i) qb[i] = static_cast<int8_t>(i * 13 % 253 - 126);
          const std::vector<float> scales(s.n, 1e-3f);
          std::string error;
          if (auto mm = OneDnnInt8Matmul::Create(s.m, s.n, s.k, qb.data(), scales.data(), &error)) {
            const Timing p =
                TimeMedian([&] { mm->Run(qa.data(), reinterpret_cast<float*>(y.data())); },
                           options.min_seconds);
            onednn = 2.0 * s.m * s.n * s.k / p.median_seconds * 1e-9;
          } else {
            report_peer_error(error, dtype);
          }
          LetPeersPark();
        }
        report_alone(t.median_seconds, peak.f32_gflops, static_cast<double>(w.bytes()), onednn);
        continue;
      }
      Operands ops(s, bf16);
      const double flop = 2.0 * s.m * s.n * s.k;
      const kernels::GemmArgs args{.m = s.m, .n = s.n, .k = s.k};
      ShapeResult r;
      r.shape = s;
      r.dtype = dtype;
      const Timing t = TimeMedian(
          [&] {
            float* c = reinterpret_cast<float*>(ops.c.data());
            if (bf16) {
              kernels::Gemm(ctx, args, reinterpret_cast<const BF16*>(ops.a.data()),
                            reinterpret_cast<const BF16*>(ops.b.data()), c);
            } else {
              kernels::Gemm(ctx, args, reinterpret_cast<const float*>(ops.a.data()),
                            reinterpret_cast<const float*>(ops.b.data()), c);
            }
          },
          options.min_seconds);
      r.gflops = flop / t.median_seconds * 1e-9;
      r.peak_fraction = r.gflops / (bf16 ? peak.bf16_gflops : peak.f32_gflops);
      r.gbs = static_cast<double>(ops.b.size()) / t.median_seconds * 1e-9;
      if (options.peers) {
        std::string error;
        if (auto mm = OneDnnMatmul::Create(s.m, s.n, s.k, false, false, bf16, false, &error)) {
          const Timing p = TimeMedian([&] { mm->Run(ops.a.data(), ops.b.data(), ops.c.data()); },
                                      options.min_seconds);
          r.onednn = flop / p.median_seconds * 1e-9;
        } else {
          report_peer_error(error, dtype);
        }
        LetPeersPark();
        if (blas && (!bf16 || blas->has_sbgemm())) {
          const Timing p = TimeMedian(
              [&] {
                float* c = reinterpret_cast<float*>(ops.c.data());
                if (bf16) {
                  blas->Sbgemm(false, false, s.m, s.n, s.k,
                               reinterpret_cast<const uint16_t*>(ops.a.data()), s.k,
                               reinterpret_cast<const uint16_t*>(ops.b.data()), s.n, c, s.n);
                } else {
                  blas->Sgemm(false, false, s.m, s.n, s.k,
                              reinterpret_cast<const float*>(ops.a.data()), s.k,
                              reinterpret_cast<const float*>(ops.b.data()), s.n, c, s.n);
                }
              },
              options.min_seconds);
          r.openblas = flop / p.median_seconds * 1e-9;
        }
        LetPeersPark();
      }
      if (options.json) {
        fmt::print("{}\n", Json(r, threads, core, isa, dram));
      } else {
        const double best = std::max(r.openblas.value_or(0), r.onednn.value_or(0));
        auto cell = [](const std::optional<double>& v) {
          return v ? fmt::format("{:9.1f}", *v) : fmt::format("{:>9}", "-");
        };
        fmt::print("{:>22} {:>5} {:9.1f} {:5.0f}% {} {} {:>7} {:8.1f} {:5.0f}%\n",
                   fmt::format("{}x{}x{}", s.m, s.n, s.k), dtype, r.gflops, 100 * r.peak_fraction,
                   cell(r.openblas), cell(r.onednn),
                   best > 0 ? fmt::format("{:.2f}x", r.gflops / best) : std::string("-"), r.gbs,
                   100 * r.gbs / dram);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace anvil::bench
