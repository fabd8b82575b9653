// Attention on every tier this CPU runs against the double oracle
// (ref/attention_ref.h) with derived tolerances; the oracle's backward against
// finite differences; exp2's accuracy; determinism over runs and threads;
// batch invariance; decode == forward rows bit for bit.
#include "anvil/kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "anvil/core/bf16.h"
#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/cpu/attention_internal.h"
#include "anvil/kernels/ref/attention_ref.h"

namespace anvil::kernels {
namespace {

constexpr double kU = 0x1p-24;  // f32 unit roundoff
#ifdef ANVIL_SANITIZED
constexpr bool kSanitized = true;  // instrumented code is ~10x slower: fewer big cases
#else
constexpr bool kSanitized = false;
#endif
// Bound on the kernels' exp2 relative error (AttentionExp2 measures < 2 ulp).
constexpr double kExp2RelErr = 4 * kU;

std::vector<Isa> Tiers() {
  std::vector<Isa> tiers = {Isa::kScalar};
  if (IsaSupported(Isa::kAvx2)) tiers.push_back(Isa::kAvx2);
  if (IsaSupported(Isa::kAvx512)) tiers.push_back(Isa::kAvx512);
  return tiers;
}

const KernelCtx& Ctx(Isa isa, int threads) {
  static ThreadPool pool1(1);
  static ThreadPool pool2(2);
  static std::map<std::pair<int, int>, std::unique_ptr<KernelCtx>> ctxs;
  auto& c = ctxs[{static_cast<int>(isa), threads}];
  if (!c) c = std::make_unique<KernelCtx>(threads == 1 ? pool1 : pool2, isa, size_t{1} << 20);
  return *c;
}

// Inputs read straight out of a fused QKV buffer [tokens, stride] (q at 0, k
// at NH*HD, v at (NH+NKV)*HD, `pad` unused elements per row), N(0, 1) values.
struct Problem {
  AttentionDims dims;
  std::vector<int32_t> cu;
  int64_t tokens = 0;
  int64_t stride = 0;
  bool bf16 = false;
  std::vector<float> qkv;  // values (exactly the bf16 values when bf16)
  std::vector<BF16> qkv16;
  std::vector<float> dout;  // [tokens, NH, HD]

  int hd() const { return dims.head_dim; }
  int64_t Off(char which) const {
    if (which == 'q') return 0;
    const int64_t k_off = int64_t{dims.num_heads} * hd();
    return which == 'k' ? k_off : k_off + int64_t{dims.num_kv_heads} * hd();
  }
  AttentionIn In(char which) const {
    const int64_t off = Off(which);
    if (bf16) return {qkv16.data() + off, DType::kBF16, stride};
    return {qkv.data() + off, DType::kF32, stride};
  }
  ref::AttentionRefView<float> View(char which) const {
    return {qkv.data() + Off(which), stride, hd()};
  }
  int64_t MaxLen() const {
    int64_t m = 0;
    for (size_t s = 0; s + 1 < cu.size(); ++s) m = std::max<int64_t>(m, cu[s + 1] - cu[s]);
    return m;
  }
};

Problem MakeProblem(const std::vector<int>& lens, int nh, int nkv, int hd, bool causal, bool bf16,
                    int pad = 0, uint64_t seed = 1) {
  Problem p;
  p.dims = {nh, nkv, hd, causal ? AttentionMask::kCausal : AttentionMask::kFull, 0.0f};
  p.cu = {0};
  for (int len : lens) p.cu.push_back(p.cu.back() + len);
  p.tokens = p.cu.back();
  p.stride = int64_t{nh + 2 * nkv} * hd + pad;
  p.bf16 = bf16;
  p.qkv.resize(p.tokens * p.stride);
  RngStream(seed, RngPurpose::kTest).FillNormal(p.qkv, 0.0f, 1.0f);
  p.qkv16.resize(p.qkv.size());
  for (size_t i = 0; i < p.qkv.size(); ++i) {
    p.qkv16[i] = ToBF16(p.qkv[i]);
    if (bf16) p.qkv[i] = ToFloat(p.qkv16[i]);
  }
  p.dout.resize(p.tokens * nh * hd);
  RngStream(seed, RngPurpose::kTest, 1).FillNormal(p.dout, 0.0f, 1.0f);
  return p;
}

struct Fwd {
  std::vector<float> out;  // [tokens, NH, HD], widened when bf16
  std::vector<BF16> out16;
  std::vector<float> lse;  // [NH, tokens]
  bool bf16 = false;
  AttentionIn In() const {
    if (bf16) return {out16.data(), DType::kBF16, 0};
    return {out.data(), DType::kF32, 0};
  }
};

// Outputs and gradients are written with `pad` extra elements per row (row
// strides past heads * HD), then compacted.
Fwd RunForward(const Problem& p, Isa isa, int threads, bool out_bf16 = false, int pad = 0) {
  Fwd f;
  f.bf16 = out_bf16;
  const int64_t row = int64_t{p.dims.num_heads} * p.hd(), stride = row + pad;
  std::vector<float> raw(p.tokens * stride, NAN);
  std::vector<BF16> raw16(raw.size(), BF16{0x7FC0});
  f.lse.assign(p.tokens * p.dims.num_heads, NAN);
  const AttentionOut out = out_bf16 ? AttentionOut{raw16.data(), DType::kBF16, stride}
                                    : AttentionOut{raw.data(), DType::kF32, stride};
  AttentionForward(Ctx(isa, threads), p.dims, p.cu, p.In('q'), p.In('k'), p.In('v'), out,
                   f.lse.data());
  f.out.resize(p.tokens * row);
  f.out16.resize(f.out.size());
  for (int64_t t = 0; t < p.tokens; ++t) {
    for (int64_t j = 0; j < row; ++j) {
      f.out16[t * row + j] = raw16[t * stride + j];
      f.out[t * row + j] = out_bf16 ? ToFloat(raw16[t * stride + j]) : raw[t * stride + j];
    }
  }
  return f;
}

struct Bwd {
  std::vector<float> dq, dk, dv;
};

Bwd RunBackward(const Problem& p, const Fwd& f, Isa isa, int threads, int pad = 0) {
  const int64_t qrow = int64_t{p.dims.num_heads} * p.hd(),
                kvrow = int64_t{p.dims.num_kv_heads} * p.hd();
  std::vector<float> dq(p.tokens * (qrow + pad), NAN), dk(p.tokens * (kvrow + pad), NAN),
      dv(dk.size(), NAN);
  AttentionBackward(Ctx(isa, threads), p.dims, p.cu, p.In('q'), p.In('k'), p.In('v'), f.In(),
                    {p.dout.data(), DType::kF32, 0}, f.lse.data(), {dq.data(), qrow + pad},
                    {dk.data(), kvrow + pad}, {dv.data(), kvrow + pad});
  auto compact = [&](const std::vector<float>& x, int64_t row) {
    std::vector<float> y(p.tokens * row);
    for (int64_t t = 0; t < p.tokens; ++t) {
      std::copy_n(x.begin() + t * (row + pad), row, y.begin() + t * row);
    }
    return y;
  };
  return {compact(dq, qrow), compact(dk, kvrow), compact(dv, kvrow)};
}

// The oracle's results with componentwise first-order error bounds for the
// kernels (u = 2^-24, e = kExp2RelErr), computed row by row as the oracle does.
// Scores: S'_c = sum_d q'_d k_cd with q' = fl(q * scale * log2 e), HD FMAs:
//   |dS'_c| <= (HD + 3) u sigma_c,  sigma_c = sum_d |q'_d k_cd|.
// Weights w_c = 2^(S'_c - m) err by dw_c = ln2 (|dS'_c| + u |S'_c - m|) + e
//   relatively (m, the running max, is an exact max of computed scores; a
//   block rescale multiplies o and l alike), normalised weights by
//   eps_c = dw_c + max_c dw_c + (nblk + 3) u. out = sum_c P_c v_c rounds once
//   per key and once per block:
//   |d out_d| <= sum_c P_c |v_cd| (eps_c + (n + 2) u)    (+ 2^-8 |out_d| for bf16 out)
//   |d lse|   <= ln2 max_c |dS'_c| + (n + nblk + 4) u + e + 2 u |lse|.
// Backward: P_c = 2^(S'_c - lse2) errs by eb_c = ln2 (|dS'_c| + u |S'_c - lse2|)
//   + |d lse| + e + 2u; dP_c = dO.v_c by HD u sum|dO||v_c|; D = dO.O by
//   dD = HD u sum|dO||O| + sum|dO||d out|; so dS_c = scale P_c (dP_c - D) by
//   ddS_c = scale P_c ((eb_c + 3u) |dP_c - D| + HD u sum|dO||v_c| + dD), and
//   dQ_d  = sum_c dS_c k_cd:  sum_c ddS_c |k_cd| + (n + 1) u |dS_c| |k_cd|
//   dK_cd += dS_c q_d:        ddS_c |q_d| + (G L + 1) u |dS_c| |q_d|   (over rows and heads)
//   dV_cd += P_c dO_d:        (eb_c + (G L + 1) u) P_c |dO_d|.
// Every bound is doubled to cover second-order terms.
struct Oracle {
  std::vector<double> out, lse, dq, dk, dv;
  std::vector<double> tol_out, tol_lse, tol_dq, tol_dk, tol_dv;
};

Oracle RunOracle(const Problem& p, bool out_bf16, bool backward) {
  const int nh = p.dims.num_heads, nkv = p.dims.num_kv_heads, hd = p.hd();
  const int64_t tokens = p.tokens;
  const auto q = p.View('q'), k = p.View('k'), v = p.View('v');
  const ref::AttentionRefView<float> dout{p.dout.data(), int64_t{nh} * hd, hd};
  Oracle o;
  o.out.resize(tokens * nh * hd);
  o.lse.resize(tokens * nh);
  ref::AttentionForwardRef(p.dims, p.cu, q, k, v, o.out.data(), o.lse.data());
  o.tol_out.assign(o.out.size(), 0.0);
  o.tol_lse.assign(o.lse.size(), 0.0);
  if (backward) {
    o.dq.resize(tokens * nh * hd);
    o.dk.resize(tokens * nkv * hd);
    o.dv.resize(tokens * nkv * hd);
    ref::AttentionBackwardRef(p.dims, p.cu, q, k, v, dout, o.dq.data(), o.dk.data(), o.dv.data());
    o.tol_dq.assign(o.dq.size(), 0.0);
    o.tol_dk.assign(o.dk.size(), 0.0);
    o.tol_dv.assign(o.dv.size(), 0.0);
  }
  const double ln2 = std::log(2.0);
  const double scale = AttentionScale(p.dims);
  const double qs2 = scale / ln2;
  const double gl = double(nh / nkv) * p.MaxLen();
  std::vector<double> w, sp, dw, e;
  for (size_t s = 0; s + 1 < p.cu.size(); ++s) {
    const int64_t b = p.cu[s], len = p.cu[s + 1] - b;
    const double nblk = std::ceil(len / double(kAttentionKvBlock));
    for (int h = 0; h < nh; ++h) {
      const int kvh = h / (nh / nkv);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t row = b + i;
        const int n = ref::AttentionRefWeights(p.dims, b, len, i, h, q, k, w, nullptr);
        sp.assign(n, 0.0);
        e.assign(n, 0.0);
        dw.assign(n, 0.0);
        double m = -INFINITY, emax = 0, dwmax = 0;
        for (int c = 0; c < n; ++c) {
          double sigma = 0;
          for (int d = 0; d < hd; ++d) {
            sp[c] += qs2 * q.At(row, h, d) * k.At(b + c, kvh, d);
            sigma += std::fabs(qs2 * q.At(row, h, d) * k.At(b + c, kvh, d));
          }
          e[c] = (hd + 3) * kU * sigma;
          m = std::max(m, sp[c]);
          emax = std::max(emax, e[c]);
        }
        for (int c = 0; c < n; ++c) {
          dw[c] = ln2 * (e[c] + kU * std::fabs(sp[c] - m)) + kExp2RelErr;
          dwmax = std::max(dwmax, dw[c]);
        }
        const int64_t oi = (row * nh + h) * hd;
        const int64_t li = h * tokens + row;
        for (int d = 0; d < hd; ++d) {
          double acc = 0;
          for (int c = 0; c < n; ++c) {
            acc += w[c] * std::fabs(v.At(b + c, kvh, d)) *
                   (dw[c] + dwmax + (nblk + 3) * kU + (n + 2) * kU);
          }
          o.tol_out[oi + d] =
              2 * acc + (out_bf16 ? 0x1p-8 * (std::fabs(o.out[oi + d]) + 2 * acc) : 0);
        }
        o.tol_lse[li] =
            2 * (ln2 * emax + (n + nblk + 4) * kU + kExp2RelErr + 2 * kU * std::fabs(o.lse[li]));
        if (!backward) continue;
        const double lse2 = o.lse[li] / ln2;
        double dsum = 0, dabs = 0, dd = 0;
        for (int d = 0; d < hd; ++d) {
          dsum += dout.At(row, h, d) * o.out[oi + d];
          dabs += std::fabs(dout.At(row, h, d) * o.out[oi + d]);
          dd += std::fabs(dout.At(row, h, d)) * o.tol_out[oi + d];
        }
        dd += hd * kU * dabs;
        for (int c = 0; c < n; ++c) {
          const double eb =
              ln2 * (e[c] + kU * std::fabs(sp[c] - lse2)) + o.tol_lse[li] + kExp2RelErr + 2 * kU;
          double dp = 0, dpabs = 0;
          for (int d = 0; d < hd; ++d) {
            dp += dout.At(row, h, d) * v.At(b + c, kvh, d);
            dpabs += std::fabs(dout.At(row, h, d) * v.At(b + c, kvh, d));
          }
          const double ds = std::fabs(scale * w[c] * (dp - dsum));
          const double dds = std::fabs(scale) * w[c] *
                             ((eb + 3 * kU) * std::fabs(dp - dsum) + hd * kU * dpabs + dd);
          const int64_t ki = ((b + c) * nkv + kvh) * hd;
          for (int d = 0; d < hd; ++d) {
            const double kd = std::fabs(k.At(b + c, kvh, d)), qd = std::fabs(q.At(row, h, d));
            o.tol_dq[oi + d] += 2 * (dds * kd + (n + 1) * kU * ds * kd);
            o.tol_dk[ki + d] += 2 * (dds * qd + (gl + 1) * kU * ds * qd);
            o.tol_dv[ki + d] += 2 * (eb + (gl + 1) * kU) * w[c] * std::fabs(dout.At(row, h, d));
          }
        }
      }
    }
  }
  return o;
}

// Largest |got - want| / tol over a tensor (NaN counts as infinitely wrong).
double WorstRatio(const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& tol, int64_t* worst_at) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double r = std::isnan(got[i]) ? INFINITY : (err == 0 ? 0 : err / tol[i]);
    if (r > worst) {
      worst = r;
      *worst_at = static_cast<int64_t>(i);
    }
  }
  return worst;
}

#define EXPECT_WITHIN(got, want, tol)                                                 \
  do {                                                                                \
    int64_t at_ = 0;                                                                  \
    const double r_ = WorstRatio(got, want, tol, &at_);                               \
    EXPECT_LE(r_, 1.0) << #got << "[" << at_ << "] = " << (got)[at_] << " vs oracle " \
                       << (want)[at_] << ", tolerance " << (tol)[at_];                \
  } while (false)

// Every tier this CPU runs against one oracle computation.
void CheckForward(const Problem& p, bool out_bf16, int out_pad = 0) {
  const Oracle o = RunOracle(p, out_bf16, false);
  for (Isa isa : Tiers()) {
    SCOPED_TRACE(IsaName(isa));
    const Fwd f = RunForward(p, isa, 2, out_bf16, out_pad);
    EXPECT_WITHIN(f.out, o.out, o.tol_out);
    EXPECT_WITHIN(f.lse, o.lse, o.tol_lse);
  }
}

void CheckBackward(const Problem& p, bool out_bf16, int pad = 0) {
  const Oracle o = RunOracle(p, out_bf16, true);
  for (Isa isa : Tiers()) {
    SCOPED_TRACE(IsaName(isa));
    const Fwd f = RunForward(p, isa, 2, out_bf16, pad);
    EXPECT_WITHIN(f.out, o.out, o.tol_out);
    const Bwd g = RunBackward(p, f, isa, 2, pad);
    EXPECT_WITHIN(g.dq, o.dq, o.tol_dq);
    EXPECT_WITHIN(g.dk, o.dk, o.tol_dk);
    EXPECT_WITHIN(g.dv, o.dv, o.tol_dv);
  }
}

TEST(AttentionExp2, AccurateWithExactEdges) {
  std::vector<float> x;
  for (double v = -126.0; v <= 0.0; v += 1.0 / 1024) x.push_back(static_cast<float>(v));
  for (float v = 0.0f; v < 1.0f; v += 1e-4f) x.push_back(v);
  x.insert(x.end(), {0.0f, -0.0f, -INFINITY, -127.0f, -127.5f, -200.0f, -1e-9f});
  std::vector<float> y(x.size());
  const std::map<Isa, void (*)(const float*, float*, int64_t)> fns = {
      {Isa::kScalar, attention_internal::Exp2Scalar},
      {Isa::kAvx2, attention_internal::Exp2Avx2},
      {Isa::kAvx512, attention_internal::Exp2Avx512}};
  for (Isa isa : Tiers()) {
    SCOPED_TRACE(IsaName(isa));
    fns.at(isa)(x.data(), y.data(), static_cast<int64_t>(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i] < -126.0f) continue;
      const double want = std::exp2(static_cast<double>(x[i]));
      worst = std::max(worst, std::fabs(y[i] - want) / want);
    }
    EXPECT_LE(worst, kExp2RelErr) << "relative error " << worst / kU << " u";
    const size_t e = x.size() - 7;
    EXPECT_EQ(y[e], 1.0f);  // 2^0 == 1 exactly: an unchanged max rescales by 1
    EXPECT_EQ(y[e + 1], 1.0f);
    EXPECT_EQ(y[e + 2], 0.0f);  // masked scores (-inf) give weight +0
    EXPECT_EQ(y[e + 3], 0.0f);
    EXPECT_EQ(y[e + 4], 0.0f);
    EXPECT_EQ(y[e + 5], 0.0f);
    EXPECT_FALSE(std::signbit(y[e + 2]));
  }
}

// The oracle's backward is the gradient of sum(out * dout) of its forward:
// central differences in double, step h = 1e-6 max(1, |x|): truncation
// ~h^2 |f'''| ~ 1e-12 and cancellation ~2^-53 |f| / h ~ 1e-10, so 1e-6.
TEST(AttentionRef, BackwardMatchesFiniteDifferences) {
  const int nh = 2, nkv = 1, hd = 4;
  const std::vector<int32_t> cu = {0, 3, 4, 8};
  const int64_t tokens = 8;
  for (AttentionMask mask : {AttentionMask::kCausal, AttentionMask::kFull}) {
    const AttentionDims dims{nh, nkv, hd, mask, 0.0f};
    std::vector<std::vector<double>> x(3);
    const int64_t heads[3] = {nh, nkv, nkv};
    for (int i = 0; i < 3; ++i) {
      std::vector<float> f(tokens * heads[i] * hd);
      RngStream(7, RngPurpose::kTest, i).FillNormal(f, 0.0f, 1.0f);
      x[i].assign(f.begin(), f.end());
    }
    std::vector<float> wf(tokens * nh * hd);
    RngStream(7, RngPurpose::kTest, 3).FillNormal(wf, 0.0f, 1.0f);
    const std::vector<double> w(wf.begin(), wf.end());
    auto view = [&](int i) {
      return ref::AttentionRefView<double>{x[i].data(), heads[i] * hd, hd};
    };
    auto loss = [&] {
      std::vector<double> out(tokens * nh * hd);
      ref::AttentionForwardRef(dims, cu, view(0), view(1), view(2), out.data(), nullptr);
      double l = 0;
      for (size_t i = 0; i < out.size(); ++i) l += out[i] * w[i];
      return l;
    };
    std::vector<std::vector<double>> grad = {std::vector<double>(x[0].size()),
                                             std::vector<double>(x[1].size()),
                                             std::vector<double>(x[2].size())};
    ref::AttentionBackwardRef(dims, cu, view(0), view(1), view(2),
                              ref::AttentionRefView<double>{w.data(), nh * hd, hd}, grad[0].data(),
                              grad[1].data(), grad[2].data());
    for (int i = 0; i < 3; ++i) {
      for (size_t j = 0; j < x[i].size(); ++j) {
        const double x0 = x[i][j];
        const double h = 1e-6 * std::max(1.0, std::fabs(x0));
        x[i][j] = x0 + h;
        const double lp = loss();
        x[i][j] = x0 - h;
        const double lm = loss();
        x[i][j] = x0;
        const double fd = (lp - lm) / (2 * h);
        EXPECT_NEAR(grad[i][j], fd, 1e-6 * std::max(1.0, std::fabs(fd)))
            << "input " << i << " element " << j;
      }
    }
  }
}

// Edge lengths around the KV block (Bc = 64), both head sizes, GQA 1/2/4.
TEST(Attention, ForwardMatchesRef) {
  for (int len : {1, 2, 7, 63, 64, 65, 197}) {
    for (int hd : {64, 128}) {
      for (int nkv : {4, 2, 1}) {
        for (bool causal : {true, false}) {
          if (len == 197 && (nkv == 2 || hd == 128) && (!causal || kSanitized)) continue;  // time
          SCOPED_TRACE(::testing::Message()
                       << "T=" << len << " HD=" << hd << " NKV=" << nkv << " causal=" << causal);
          CheckForward(MakeProblem({len}, 4, nkv, hd, causal, false, 0, len), false);
        }
      }
    }
  }
}

// Packed documents of uneven lengths (one of length 1, one empty), padded
// fused input rows and padded output rows, bf16 inputs and outputs.
TEST(Attention, ForwardPackedBf16MatchesRef) {
  for (bool causal : {true, false}) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "causal=" << causal << " bf16=" << bf16);
      CheckForward(MakeProblem({5, 1, 64, 70, 3, 0, 130}, 4, 2, 64, causal, bf16, 16, 3), bf16, 8);
    }
  }
}

TEST(Attention, BackwardMatchesRef) {
  for (int len : {1, 7, 64, 65, 197}) {
    for (int hd : {64, 128}) {
      for (int nkv : {4, 1}) {
        for (bool causal : {true, false}) {
          if (len == 197 && (hd == 128 || !causal)) continue;  // time
          SCOPED_TRACE(::testing::Message()
                       << "T=" << len << " HD=" << hd << " NKV=" << nkv << " causal=" << causal);
          CheckBackward(MakeProblem({len}, 4, nkv, hd, causal, false, 0, 100 + len), false);
        }
      }
    }
  }
}

TEST(Attention, BackwardPackedBf16MatchesRef) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(::testing::Message() << "causal=" << causal);
    CheckBackward(MakeProblem({5, 1, 70, 3, 0, 66}, 4, 2, 64, causal, true, 16, 5), true, 8);
  }
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Attention, DeterministicOverRunsAndThreads) {
  for (Isa isa : Tiers()) {
    for (bool bf16 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << IsaName(isa) << " bf16=" << bf16);
      const Problem p = MakeProblem({100, 37, 64, 1, 130}, 4, 2, 64, true, bf16, 8, 9);
      const Fwd f1 = RunForward(p, isa, 1, bf16);
      const Fwd f2 = RunForward(p, isa, 2, bf16);
      const Fwd f2b = RunForward(p, isa, 2, bf16);
      EXPECT_TRUE(SameBits(f1.out, f2.out) && SameBits(f1.lse, f2.lse));
      EXPECT_TRUE(SameBits(f2.out, f2b.out) && SameBits(f2.lse, f2b.lse));
      const Bwd g1 = RunBackward(p, f1, isa, 1);
      const Bwd g2 = RunBackward(p, f1, isa, 2);
      const Bwd g2b = RunBackward(p, f1, isa, 2);
      EXPECT_TRUE(SameBits(g1.dq, g2.dq) && SameBits(g1.dk, g2.dk) && SameBits(g1.dv, g2.dv));
      EXPECT_TRUE(SameBits(g2.dq, g2b.dq) && SameBits(g2.dk, g2b.dk) && SameBits(g2.dv, g2b.dv));
    }
  }
}

// Rows [t0, t0 + n) of every head of a [tokens, heads, HD] tensor.
std::vector<float> RowsOf(const std::vector<float>& x, int64_t heads_hd, int64_t t0, int64_t n) {
  return {x.begin() + t0 * heads_hd, x.begin() + (t0 + n) * heads_hd};
}

// A sequence alone and packed between two others: bitwise the same results.
TEST(Attention, BatchInvariant) {
  for (Isa isa : Tiers()) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE(::testing::Message() << IsaName(isa) << " causal=" << causal);
      const int nh = 4, nkv = 2, hd = 64, len = 90;
      Problem packed = MakeProblem({50, len, 130}, nh, nkv, hd, causal, false, 0, 11);
      Problem alone = MakeProblem({len}, nh, nkv, hd, causal, false, 0, 12);
      const int64_t b = 50;
      std::copy(packed.qkv.begin() + b * packed.stride,
                packed.qkv.begin() + (b + len) * packed.stride, alone.qkv.begin());
      std::copy(packed.dout.begin() + b * nh * hd, packed.dout.begin() + (b + len) * nh * hd,
                alone.dout.begin());
      const Fwd fp = RunForward(packed, isa, 2), fa = RunForward(alone, isa, 2);
      EXPECT_TRUE(SameBits(RowsOf(fp.out, nh * hd, b, len), fa.out));
      for (int h = 0; h < nh; ++h) {
        EXPECT_TRUE(SameBits(RowsOf(fp.lse, 1, h * packed.tokens + b, len),
                             RowsOf(fa.lse, 1, h * len, len)));
      }
      const Bwd gp = RunBackward(packed, fp, isa, 2), ga = RunBackward(alone, fa, isa, 2);
      EXPECT_TRUE(SameBits(RowsOf(gp.dq, nh * hd, b, len), ga.dq));
      EXPECT_TRUE(SameBits(RowsOf(gp.dk, nkv * hd, b, len), ga.dk));
      EXPECT_TRUE(SameBits(RowsOf(gp.dv, nkv * hd, b, len), ga.dv));
    }
  }
}

// Decode of rows p..p+n-1 against a cache of rows 0..p+n-1 reproduces the
// training forward's rows bit for bit (the forward ran over a longer
// sequence; causal rows never see later keys), around block boundaries.
TEST(AttentionDecode, BitwiseEqualsForwardRows) {
  struct Case {
    int hd;
    bool bf16;
  };
  // HD 16 and 256: the decode tile's fewest and most HD vectors per row.
  const Case cases[] = {{64, false}, {64, true}, {16, false}, {256, true}};
  for (Isa isa : Tiers()) {
    for (const Case& c : cases) {
      const bool bf16 = c.bf16;
      for (int nkv : {4, 1}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " bf16=" << bf16 << " NKV=" << nkv
                                          << " HD=" << c.hd);
        const int nh = 4, hd = c.hd;
        const Problem p = MakeProblem({37, 200, 20}, nh, nkv, hd, true, bf16, 8, 13);
        const Fwd f = RunForward(p, isa, 2, bf16);
        const int64_t b = 37;
        // n = 40 with GQA 4: 160 lanes, more than one tile (128).
        for (int64_t pos : {0, 1, 62, 63, 64, 65, 127, 128, 150, 160, 196}) {
          for (int64_t n : {1, 2, 3, 40}) {
            if (pos + n > 200 || (n == 40 && pos != 160 && pos != 0)) continue;
            if (hd != 64 && (n == 40 || pos % 2 == 0)) continue;  // time
            std::vector<float> out(n * nh * hd, NAN), lse(nh * n, NAN);
            std::vector<BF16> out16(out.size());
            const AttentionIn q = p.In('q'), k = p.In('k'), v = p.In('v');
            const size_t es = bf16 ? 2 : 4;
            auto at_row = [&](const AttentionIn& in, int64_t row) {
              return AttentionIn{static_cast<const char*>(in.data) + row * p.stride * es, in.dtype,
                                 p.stride};
            };
            const AttentionOut o = bf16 ? AttentionOut{out16.data(), DType::kBF16, 0}
                                        : AttentionOut{out.data(), DType::kF32, 0};
            AttentionDecode(Ctx(isa, 2), p.dims, pos, n, at_row(q, b + pos), at_row(k, b),
                            at_row(v, b), o, lse.data());
            if (bf16) {
              for (size_t i = 0; i < out.size(); ++i) out[i] = ToFloat(out16[i]);
            }
            EXPECT_TRUE(SameBits(out, RowsOf(f.out, nh * hd, b + pos, n)))
                << "pos " << pos << " n " << n;
            for (int h = 0; h < nh; ++h) {
              EXPECT_TRUE(
                  SameBits(RowsOf(lse, 1, h * n, n), RowsOf(f.lse, 1, h * p.tokens + b + pos, n)))
                  << "pos " << pos << " n " << n << " head " << h;
            }
          }
        }
      }
    }
  }
}

// AttentionDecode of n rows at pos (output in f32 or bf16), its output
// widened to f32 and followed by its log-sum-exps: one vector to compare.
std::vector<float> DecodeOutAndLse(Isa isa, const AttentionDims& dims, int64_t pos, int64_t n,
                                   const AttentionIn& q, const AttentionIn& k, const AttentionIn& v,
                                   bool bf16) {
  std::vector<float> out(n * dims.num_heads * dims.head_dim), lse(dims.num_heads * n);
  std::vector<BF16> out16(out.size());
  const AttentionOut o =
      bf16 ? AttentionOut{out16.data(), DType::kBF16, 0} : AttentionOut{out.data(), DType::kF32, 0};
  AttentionDecode(Ctx(isa, 2), dims, pos, n, q, k, v, o, lse.data());
  if (bf16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = ToFloat(out16[i]);
  }
  out.insert(out.end(), lse.begin(), lse.end());
  return out;
}

// A paged cache (rows in pages of 64 or 128, the pages anywhere in memory)
// gives the contiguous cache's bits: a key block never straddles pages.
TEST(AttentionDecode, PagedCacheSameBits) {
  for (Isa isa : Tiers()) {
    for (const bool bf16 : {false, true}) {
      const int nh = 4, nkv = 2, hd = 64;
      const Problem p = MakeProblem({200}, nh, nkv, hd, true, bf16, 8, 21);
      const size_t es = bf16 ? 2 : 4;
      const int64_t row_bytes = int64_t{nkv} * hd * static_cast<int64_t>(es);
      auto at_row = [&](const AttentionIn& in, int64_t row) {
        return static_cast<const char*>(in.data) + row * p.stride * static_cast<int64_t>(es);
      };
      for (const int64_t page_rows : {64, 128}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " bf16=" << bf16 << " page "
                                          << page_rows);
        // Pages in reverse order of memory, each [page_rows, NKV * HD].
        const int64_t pages = (200 + page_rows - 1) / page_rows;
        std::vector<std::vector<char>> kp(pages), vp(pages);
        std::vector<const void*> kt(pages), vt(pages);
        for (int64_t i = pages - 1; i >= 0; --i) {
          kp[i].assign(page_rows * row_bytes, 0);
          vp[i].assign(page_rows * row_bytes, 0);
          kt[i] = kp[i].data();
          vt[i] = vp[i].data();
        }
        for (int64_t r = 0; r < 200; ++r) {
          std::memcpy(kp[r / page_rows].data() + (r % page_rows) * row_bytes, at_row(p.In('k'), r),
                      row_bytes);
          std::memcpy(vp[r / page_rows].data() + (r % page_rows) * row_bytes, at_row(p.In('v'), r),
                      row_bytes);
        }
        const AttentionIn kpaged{nullptr, p.In('k').dtype, 0, kt.data(), page_rows};
        const AttentionIn vpaged{nullptr, p.In('v').dtype, 0, vt.data(), page_rows};
        for (const auto& [pos, n] : {std::pair<int64_t, int64_t>{0, 1}, {63, 2}, {127, 3},
                                     {150, 40}, {199, 1}}) {
          const AttentionIn q{at_row(p.In('q'), pos), p.In('q').dtype, p.stride};
          auto run = [&](const AttentionIn& k, const AttentionIn& v) {
            return DecodeOutAndLse(isa, p.dims, pos, n, q, k, v, bf16);
          };
          const AttentionIn kc{p.In('k').data, p.In('k').dtype, p.stride};
          const AttentionIn vc{p.In('v').data, p.In('v').dtype, p.stride};
          EXPECT_TRUE(SameBits(run(kpaged, vpaged), run(kc, vc))) << "pos " << pos << " n " << n;
        }
      }
    }
  }
}

// Caches in head blocks (K transposed, V as rows, each block's heads one
// after another), contiguous or paged, give the row caches' bits: decode
// tiles (a few rows, read in place) and forward tiles (40 rows x GQA 2,
// staged) alike, f32 and bf16, around block ends; HD 16 as well as 64, so
// [HD][block] and [block][HD] differ in shape. The rows a cache has not
// filled are NaN: keys read past a row's last (within its block) must not
// reach it.
TEST(AttentionDecode, HeadBlocksSameBits) {
  for (Isa isa : Tiers()) {
    for (const auto& [bf16, hd] :
         {std::pair<bool, int>{false, 64}, {true, 64}, {false, 16}, {true, 16}}) {
      const int nh = 4, nkv = 2;
      const int64_t rows = 200, blocks_rows = 256;  // whole blocks
      const Problem p = MakeProblem({rows}, nh, nkv, hd, true, bf16, 8, 23);
      const size_t es = bf16 ? 2 : 4;
      const int64_t row = int64_t{nkv} * hd;
      // The caches as rows (dense), and in head blocks.
      std::vector<char> kr(rows * row * es), vr(rows * row * es);
      std::vector<char> kb(blocks_rows * row * es, '\xff'), vb(blocks_rows * row * es, '\xff');
      for (int64_t t = 0; t < rows; ++t) {
        const char* k = static_cast<const char*>(p.In('k').data) + t * p.stride * es;
        const char* v = static_cast<const char*>(p.In('v').data) + t * p.stride * es;
        std::memcpy(kr.data() + t * row * es, k, row * es);
        std::memcpy(vr.data() + t * row * es, v, row * es);
        for (int h = 0; h < nkv; ++h) {
          for (int d = 0; d < hd; ++d) {
            const int64_t i = int64_t{h} * hd + d;
            std::memcpy(kb.data() + HeadBlockKey(t, h, d, nkv, hd) * es, k + i * es, es);
            std::memcpy(vb.data() + HeadBlockValue(t, h, d, nkv, hd) * es, v + i * es, es);
          }
        }
      }
      const DType dt = p.In('k').dtype;
      // Pages of 128 rows, in reverse order of memory.
      std::vector<char> kb2(kb.size()), vb2(vb.size());
      std::memcpy(kb2.data(), kb.data() + 128 * row * es, 128 * row * es);
      std::memcpy(kb2.data() + 128 * row * es, kb.data(), 128 * row * es);
      std::memcpy(vb2.data(), vb.data() + 128 * row * es, 128 * row * es);
      std::memcpy(vb2.data() + 128 * row * es, vb.data(), 128 * row * es);
      const std::vector<const void*> kswap = {kb2.data() + 128 * row * es, kb2.data()};
      const std::vector<const void*> vswap = {vb2.data() + 128 * row * es, vb2.data()};
      for (const auto& [pos, n] : {std::pair<int64_t, int64_t>{0, 1},
                                   {31, 1},
                                   {63, 1},
                                   {64, 2},
                                   {95, 1},
                                   {127, 3},
                                   {150, 40},
                                   {199, 1}}) {
        SCOPED_TRACE(::testing::Message() << IsaName(isa) << " bf16=" << bf16 << " HD " << hd
                                          << " pos " << pos << " n " << n);
        const AttentionIn q{static_cast<const char*>(p.In('q').data) + pos * p.stride * es, dt,
                            p.stride};
        auto run = [&](const AttentionIn& k, const AttentionIn& v) {
          return DecodeOutAndLse(isa, p.dims, pos, n, q, k, v, bf16);
        };
        const std::vector<float> want = run({kr.data(), dt, 0}, {vr.data(), dt, 0});
        EXPECT_TRUE(SameBits(
            run({kb.data(), dt, 0, nullptr, 0, true}, {vb.data(), dt, 0, nullptr, 0, true}), want));
        EXPECT_TRUE(SameBits(run({nullptr, dt, 0, kswap.data(), 128, true},
                                 {nullptr, dt, 0, vswap.data(), 128, true}),
                             want));
        // Head-block keys with row values, and the other way round.
        EXPECT_TRUE(SameBits(run({kb.data(), dt, 0, nullptr, 0, true}, {vr.data(), dt, 0}), want));
        EXPECT_TRUE(SameBits(run({kr.data(), dt, 0}, {vb.data(), dt, 0, nullptr, 0, true}), want));
      }
    }
  }
}

// Long sequences use 128-row query tiles (fewer passes over K/V). A row's
// arithmetic does not depend on the tile, so the results are bitwise those of
// 64-row tiles (backward too: dK/dV/dQ take the same terms in the same order;
// a tall tile only adds fully masked blocks, whose P and dS are exact zeros),
// and they match the oracle.
TEST(Attention, TallTilesSameBitsAndMatchRef) {
  const Problem p = MakeProblem({197, 1, 130}, 4, 2, 64, true, false, 8, 17);
  for (Isa isa : Tiers()) {
    SCOPED_TRACE(IsaName(isa));
    const Fwd f64 = RunForward(p, isa, 2);
    const Bwd g64 = RunBackward(p, f64, isa, 2);
    attention_internal::SetTallTileFromForTesting(100);
    const Fwd f128 = RunForward(p, isa, 2);
    const Bwd g128 = RunBackward(p, f64, isa, 2);
    attention_internal::SetTallTileFromForTesting(-1);
    EXPECT_TRUE(SameBits(f64.out, f128.out) && SameBits(f64.lse, f128.lse));
    EXPECT_TRUE(SameBits(g64.dq, g128.dq) && SameBits(g64.dk, g128.dk) &&
                SameBits(g64.dv, g128.dv));
  }
  attention_internal::SetTallTileFromForTesting(1);
  CheckBackward(p, false);
  attention_internal::SetTallTileFromForTesting(-1);
}

TEST(AttentionDeathTest, ChecksArguments) {
  const Problem p = MakeProblem({8}, 2, 2, 64, true, false);
  std::vector<float> out(8 * 2 * 64);
  AttentionDims bad = p.dims;
  bad.head_dim = 40;
  EXPECT_DEATH(AttentionForward(Ctx(Isa::kScalar, 1), bad, p.cu, p.In('q'), p.In('k'), p.In('v'),
                                {out.data(), DType::kF32, 0}, nullptr),
               "head_dim");
  bad = p.dims;
  bad.num_kv_heads = 3;
  EXPECT_DEATH(AttentionForward(Ctx(Isa::kScalar, 1), bad, p.cu, p.In('q'), p.In('k'), p.In('v'),
                                {out.data(), DType::kF32, 0}, nullptr),
               "num_kv_heads");
  const std::vector<int32_t> cu = {0, 5, 3};
  EXPECT_DEATH(AttentionForward(Ctx(Isa::kScalar, 1), p.dims, cu, p.In('q'), p.In('k'), p.In('v'),
                                {out.data(), DType::kF32, 0}, nullptr),
               "cu_seqlens");
}

}  // namespace
}  // namespace anvil::kernels
