// `anvil bench attention`: FlashAttention (anvil::kernels) forward and
// forward+backward against a naive f32 implementation with T x T buffers, in
// the same run, with GFLOP/s, the fraction of the measured f32 FMA peak on the
// same threads, and the peak bytes each keeps live.
//
// FLOPs follow FlashAttention-2's convention: forward 4 T^2 HD NH per
// sequence (two matmuls), halved for causal; backward 2.5x forward (five
// matmuls); fwd+bwd = 3.5x forward. Softmax and exp are not counted.
#include "attention_bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/bf16.h"
#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/attention.h"
#include "anvil/kernels/ctx.h"
#include "anvil/profile/peak.h"
#include "timing.h"

namespace anvil::bench {
namespace {

using kernels::AttentionDims;

// A float array of n elements, touched once (first touch is slow: ~10 us / 4 KiB).
struct Floats {
  explicit Floats(size_t n) : buf(n * sizeof(float)), size(n) {
    std::fill(data(), data() + n, 0.0f);
  }
  float* data() { return reinterpret_cast<float*>(buf.data()); }
  AlignedBuffer buf;
  size_t size;
};

struct Shape {
  long batch, t;
  int nh, nkv, hd;
  bool causal;
  long tokens() const { return batch * t; }
};

// ---- naive reference: materialised scores, straightforward loops ------------

// Per (sequence, kv head): scores S = scale Q K^T for each query head of the
// group into P [NH per batch][T][T] (kept for the backward, as eager
// frameworks keep the softmax output), row softmax, O = P V. Inner loops run
// over contiguous j or d and vectorise; K and V are transposed once per head.
struct Naive {
  Shape s;
  float scale;
  std::vector<Floats> p;    // [batch * NH] x T*T
  std::vector<Floats> tmp;  // per thread: T*T (dP / dS), HD*T (K^T or V^T)
  std::vector<Floats> tr;

  Naive(const Shape& shape, int threads, bool backward) : s(shape) {
    scale = 1.0f / std::sqrt(static_cast<float>(s.hd));
    for (long i = 0; i < s.batch * s.nh; ++i) p.emplace_back(size_t(s.t) * s.t);
    for (int i = 0; i < threads; ++i) {
      if (backward) tmp.emplace_back(size_t(s.t) * s.t);
      tr.emplace_back(size_t(s.hd) * s.t);
    }
  }

  static size_t Bytes(const Shape& s, int threads, bool backward) {
    return (size_t(s.batch) * s.nh + (backward ? threads : 0)) * s.t * s.t * 4 +
           size_t(threads) * s.hd * s.t * 4;
  }

  long Cols(long i) const { return s.causal ? i + 1 : s.t; }

  // x [tokens, heads, HD] -> xt [HD][T] for sequence b, head h.
  void Transpose(const float* x, int heads, long b, int h, float* xt) const {
    for (long j = 0; j < s.t; ++j) {
      for (int d = 0; d < s.hd; ++d) xt[d * s.t + j] = x[((b * s.t + j) * heads + h) * s.hd + d];
    }
  }

  void Forward(ThreadPool& pool, const float* q, const float* k, const float* v, float* o) {
    const int group = s.nh / s.nkv;
    pool.ParallelFor(s.batch * s.nh, [&](int64_t begin, int64_t end, int t) {
      float* kt = tr[t].data();
      for (int64_t bh = begin; bh < end; ++bh) {
        const long b = bh / s.nh;
        const int h = static_cast<int>(bh % s.nh);
        float* pm = p[bh].data();
        Transpose(k, s.nkv, b, h / group, kt);
        for (long i = 0; i < s.t; ++i) {
          float* row = pm + i * s.t;
          const long n = Cols(i);
          std::fill(row, row + n, 0.0f);
          const float* qi = q + ((b * s.t + i) * s.nh + h) * s.hd;
          for (int d = 0; d < s.hd; ++d) {
            const float qd = qi[d] * scale;
            const float* kd = kt + d * s.t;
            for (long j = 0; j < n; ++j) row[j] += qd * kd[j];
          }
          float m = -INFINITY;
          for (long j = 0; j < n; ++j) m = std::max(m, row[j]);
          float sum = 0;
          for (long j = 0; j < n; ++j) {
            row[j] = std::exp(row[j] - m);
            sum += row[j];
          }
          const float inv = 1.0f / sum;
          for (long j = 0; j < n; ++j) row[j] *= inv;
          float* oi = o + ((b * s.t + i) * s.nh + h) * s.hd;
          std::fill(oi, oi + s.hd, 0.0f);
          for (long j = 0; j < n; ++j) {
            const float pj = row[j];
            const float* vj = v + ((b * s.t + j) * s.nkv + h / group) * s.hd;
            for (int d = 0; d < s.hd; ++d) oi[d] += pj * vj[d];
          }
        }
      }
    });
  }

  // Textbook backward from the saved P: dV = P^T dO, dP = dO V^T,
  // dS = P (dP - rowsum(P dP)), dQ = scale dS K, dK = scale dS^T Q.
  void Backward(ThreadPool& pool, const float* q, const float* k, const float* v, const float* dout,
                float* dq, float* dk, float* dv) {
    const int group = s.nh / s.nkv;
    pool.ParallelFor(s.batch * s.nkv, [&](int64_t begin, int64_t end, int t) {
      float* vt = tr[t].data();
      float* ds = tmp[t].data();
      for (int64_t bk = begin; bk < end; ++bk) {
        const long b = bk / s.nkv;
        const int kvh = static_cast<int>(bk % s.nkv);
        for (long j = 0; j < s.t; ++j) {
          std::fill_n(dk + ((b * s.t + j) * s.nkv + kvh) * s.hd, s.hd, 0.0f);
          std::fill_n(dv + ((b * s.t + j) * s.nkv + kvh) * s.hd, s.hd, 0.0f);
        }
        Transpose(v, s.nkv, b, kvh, vt);
        for (int h = kvh * group; h < (kvh + 1) * group; ++h) {
          const float* pm = p[b * s.nh + h].data();
          for (long i = 0; i < s.t; ++i) {
            const long n = Cols(i);
            const float* pi = pm + i * s.t;
            float* dsi = ds + i * s.t;
            const float* doi = dout + ((b * s.t + i) * s.nh + h) * s.hd;
            std::fill(dsi, dsi + n, 0.0f);
            for (int d = 0; d < s.hd; ++d) {
              const float* vd = vt + d * s.t;
              for (long j = 0; j < n; ++j) dsi[j] += doi[d] * vd[j];
            }
            float dsum = 0;
            for (long j = 0; j < n; ++j) dsum += pi[j] * dsi[j];
            for (long j = 0; j < n; ++j) dsi[j] = pi[j] * (dsi[j] - dsum) * scale;
          }
          // dV += P^T dO, dK += dS^T Q (row axpys), dQ = dS K (accumulated in
          // a local row, so the sum stays in registers).
          float acc[256];
          for (long i = 0; i < s.t; ++i) {
            const long n = Cols(i);
            const float* pi = pm + i * s.t;
            const float* dsi = ds + i * s.t;
            const float* doi = dout + ((b * s.t + i) * s.nh + h) * s.hd;
            const float* qi = q + ((b * s.t + i) * s.nh + h) * s.hd;
            for (long j = 0; j < n; ++j) {
              float* dvj = dv + ((b * s.t + j) * s.nkv + kvh) * s.hd;
              for (int d = 0; d < s.hd; ++d) dvj[d] += pi[j] * doi[d];
            }
            for (long j = 0; j < n; ++j) {
              float* dkj = dk + ((b * s.t + j) * s.nkv + kvh) * s.hd;
              for (int d = 0; d < s.hd; ++d) dkj[d] += dsi[j] * qi[d];
            }
            std::fill(acc, acc + s.hd, 0.0f);
            for (long j = 0; j < n; ++j) {
              const float* kj = k + ((b * s.t + j) * s.nkv + kvh) * s.hd;
              for (int d = 0; d < s.hd; ++d) acc[d] += dsi[j] * kj[d];
            }
            std::copy(acc, acc + s.hd, dq + ((b * s.t + i) * s.nh + h) * s.hd);
          }
        }
      }
    });
  }
};

// ---- one sequence length ---------------------------------------------------------

struct PassResult {
  long t;
  std::string pass, impl;
  double seconds, gflops, peak_frac;
  size_t bytes;
};

Timing Time(double min_seconds, const auto& fn) {
  Stopwatch once;
  fn();  // warm-up, also first touch of the scratch pages
  return TimeMedian(fn, min_seconds, once.Seconds() > 1.0 ? 3 : 5);
}

void Report(const AttentionBenchOptions& o, const PassResult& r, int threads) {
  if (o.json) {
    fmt::print(
        "{{\"bench\":\"attention\",\"impl\":\"{}\",\"pass\":\"{}\",\"seq\":{},\"batch\":{},"
        "\"heads\":{},\"kv_heads\":{},\"head_dim\":{},\"causal\":{},\"dtype\":\"{}\","
        "\"fused_qkv\":{},\"threads\":{},\"ms\":{:.3f},\"gflops\":{:.1f},\"peak_frac\":{:.3f},"
        "\"peak_mib\":{:.1f}}}"
        "\n",
        r.impl, r.pass, r.t, o.batch, o.heads, o.kv_heads, o.head_dim, o.causal,
        o.bf16 ? "bf16" : "f32", o.fused_qkv, threads, r.seconds * 1e3, r.gflops, r.peak_frac,
        r.bytes / 1048576.0);
  } else {
    fmt::print("{:>6} {:<8} {:<6} {:>10.2f} {:>9.1f} {:>7.1f}% {:>10.1f}\n", r.t, r.pass, r.impl,
               r.seconds * 1e3, r.gflops, 100 * r.peak_frac, r.bytes / 1048576.0);
  }
}

void BenchOne(const AttentionBenchOptions& o, long t, ThreadPool& pool, double peak) {
  const Shape s{o.batch, t, o.heads, o.kv_heads, o.head_dim, o.causal};
  const int threads = pool.size();
  const size_t nq = size_t(s.tokens()) * s.nh * s.hd, nkv = size_t(s.tokens()) * s.nkv * s.hd;
  Floats q(nq), k(nkv), v(nkv), out(nq), lse(size_t(s.tokens()) * s.nh), dout(nq), dq(nq), dk(nkv),
      dv(nkv);
  const RngStream rng(2024, RngPurpose::kTest);
  rng.FillNormal({q.data(), nq}, 0, 1, 0);
  rng.FillNormal({k.data(), nkv}, 0, 1, nq);
  rng.FillNormal({v.data(), nkv}, 0, 1, nq + nkv);
  rng.FillNormal({dout.data(), nq}, 0, 1, 2 * (nq + nkv));
  // bf16 inputs: the same values rounded, in their own buffers.
  AlignedBuffer q16(nq * 2), k16(nkv * 2), v16(nkv * 2);
  if (o.bf16) {
    for (size_t i = 0; i < nq; ++i) reinterpret_cast<BF16*>(q16.data())[i] = ToBF16(q.data()[i]);
    for (size_t i = 0; i < nkv; ++i) {
      reinterpret_cast<BF16*>(k16.data())[i] = ToBF16(k.data()[i]);
      reinterpret_cast<BF16*>(v16.data())[i] = ToBF16(v.data()[i]);
    }
  }
  const DType in = o.bf16 ? DType::kBF16 : DType::kF32;
  const size_t in_bytes = o.bf16 ? 2 : 4;
  // --fused-qkv: the same values as rows of one [tokens, (NH + 2 NKV) HD]
  // buffer (the model's layout: each operand's rows (NH + 2 NKV) HD apart),
  // and the gradients likewise; the naive reference keeps the dense ones.
  const int64_t fused_stride = int64_t{s.nh + 2 * s.nkv} * s.hd;
  const size_t nfused = o.fused_qkv ? size_t(s.tokens()) * fused_stride : 0;
  Floats fused(nfused), dfused(nfused);
  AlignedBuffer fused16(nfused * 2);
  const int64_t k_col = int64_t{s.nh} * s.hd, v_col = k_col + int64_t{s.nkv} * s.hd;
  for (long r = 0; r < (o.fused_qkv ? s.tokens() : 0); ++r) {
    float* row = fused.data() + r * fused_stride;
    std::copy_n(q.data() + r * k_col, k_col, row);
    std::copy_n(k.data() + r * s.nkv * s.hd, s.nkv * s.hd, row + k_col);
    std::copy_n(v.data() + r * s.nkv * s.hd, s.nkv * s.hd, row + v_col);
  }
  for (size_t i = 0; i < (o.bf16 ? nfused : 0); ++i) {
    reinterpret_cast<BF16*>(fused16.data())[i] = ToBF16(fused.data()[i]);
  }
  auto input = [&](Floats& f, AlignedBuffer& b) {
    if (o.fused_qkv) {
      const int64_t col = &f == &q ? 0 : &f == &k ? k_col : v_col;
      const void* base =
          o.bf16 ? static_cast<const void*>(reinterpret_cast<const BF16*>(fused16.data()) + col)
                 : fused.data() + col;
      return kernels::AttentionIn{base, in, fused_stride};
    }
    return kernels::AttentionIn{o.bf16 ? static_cast<const void*>(b.data()) : f.data(), in, 0};
  };
  auto grad = [&](Floats& f) {
    if (!o.fused_qkv) return kernels::AttentionGrad{f.data(), 0};
    const int64_t col = &f == &dq ? 0 : &f == &dk ? k_col : v_col;
    return kernels::AttentionGrad{dfused.data() + col, fused_stride};
  };

  const AttentionDims dims{
      s.nh, s.nkv, s.hd, s.causal ? kernels::AttentionMask::kCausal : kernels::AttentionMask::kFull,
      0.0f};
  const size_t scratch = kernels::AttentionScratchBytes(dims);
  const kernels::KernelCtx ctx(pool, BestIsa(), scratch);
  std::vector<int32_t> cu(s.batch + 1);
  for (long b = 0; b <= s.batch; ++b) cu[b] = static_cast<int32_t>(b * t);

  const double fwd_flops = 4.0 * double(t) * t * s.hd * s.nh * s.batch / (s.causal ? 2 : 1);
  const bool with_bwd = o.backward && (t <= 4096 || !o.seq_lens.empty());
  const size_t io_fwd = (nq + 2 * nkv) * in_bytes + nq * 4 + lse.size * 4;
  const size_t io_bwd = io_fwd + (2 * nq + 2 * nkv) * 4;
  auto fwd = [&] {
    kernels::AttentionForward(ctx, dims, cu, input(q, q16), input(k, k16), input(v, v16),
                              {out.data(), DType::kF32, 0}, lse.data());
  };
  auto bwd = [&] {
    kernels::AttentionBackward(ctx, dims, cu, input(q, q16), input(k, k16), input(v, v16),
                               {out.data(), DType::kF32, 0}, {dout.data(), DType::kF32, 0},
                               lse.data(), grad(dq), grad(dk), grad(dv));
  };
  auto report = [&](const char* pass, const char* impl, double secs, double flops, size_t bytes) {
    Report(o, {t, pass, impl, secs, flops / secs * 1e-9, flops / secs * 1e-9 / peak, bytes},
           threads);
  };
  const size_t anvil_scratch = size_t(threads) * scratch;
  report("fwd", "anvil", Time(o.min_seconds, fwd).median_seconds, fwd_flops,
         io_fwd + anvil_scratch);
  if (with_bwd) {
    report("fwd+bwd", "anvil",
           Time(o.min_seconds,
                [&] {
                  fwd();
                  bwd();
                })
               .median_seconds,
           3.5 * fwd_flops, io_bwd + anvil_scratch);
  }

  constexpr size_t kNaiveLimit = size_t{2} << 30;
  if (!o.naive) return;
  const size_t naive_io = (nq + 2 * nkv) * 4 + nq * 4;  // f32 copies (bf16 inputs widened first)
  for (const bool backward : {false, true}) {
    if (backward && !with_bwd) break;
    const size_t bytes = Naive::Bytes(s, threads, backward);
    if (bytes > kNaiveLimit) {
      if (!o.json)
        fmt::print("{:>6} {:<8} naive  skipped: its T x T buffers need {:.1f} GiB\n", t,
                   backward ? "fwd+bwd" : "fwd", bytes / double(1 << 30));
      continue;
    }
    Naive naive(s, threads, backward);
    if (!backward) {
      report("fwd", "naive",
             Time(o.min_seconds,
                  [&] { naive.Forward(pool, q.data(), k.data(), v.data(), out.data()); })
                 .median_seconds,
             fwd_flops, naive_io + bytes);
    } else {
      report("fwd+bwd", "naive",
             Time(o.min_seconds,
                  [&] {
                    naive.Forward(pool, q.data(), k.data(), v.data(), out.data());
                    naive.Backward(pool, q.data(), k.data(), v.data(), dout.data(), dq.data(),
                                   dk.data(), dv.data());
                  })
                 .median_seconds,
             3.5 * fwd_flops, naive_io + (2 * nq + 2 * nkv) * 4 + bytes);
    }
  }
}

}  // namespace

int RunAttentionBench(const AttentionBenchOptions& options) {
  const int threads = options.threads > 0 ? options.threads : DefaultThreadCount();
  ThreadPool pool(threads);
  const profile::PeakFlops peak = profile::MeasurePeakFlops(pool);
  std::vector<long> seqs = options.seq_lens;
  if (seqs.empty()) seqs = {256, 1024, 4096, 16384};
  if (!options.json) {
    fmt::print(
        "attention: batch {} heads {} kv_heads {} head_dim {} {} {} inputs{}, {} threads ({}); "
        "f32 FMA peak {:.0f} GFLOP/s\n",
        options.batch, options.heads, options.kv_heads, options.head_dim,
        options.causal ? "causal" : "full", options.bf16 ? "bf16" : "f32",
        options.fused_qkv ? " in one qkv buffer" : "", threads, IsaName(BestIsa()),
        peak.f32_gflops);
    fmt::print(
        "GFLOP/s: FA2 convention (fwd 4 T^2 HD NH, /2 causal; fwd+bwd 3.5x fwd); "
        "peak MiB: inputs, outputs and scratch (naive: + T x T buffers)\n");
    fmt::print("{:>6} {:<8} {:<6} {:>10} {:>9} {:>8} {:>10}\n", "T", "pass", "impl", "ms",
               "GFLOP/s", "of peak", "peak MiB");
  }
  for (long t : seqs) BenchOne(options, t, pool, peak.f32_gflops);
  return 0;
}

}  // namespace anvil::bench
