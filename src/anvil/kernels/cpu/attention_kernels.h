// Attention's inner loops over simd.h's vector types V: exp2, a register-
// blocked "broadcast GEMM" (the five matmuls of FA2 are all of this one shape)
// and the online-softmax / softmax-gradient passes over a transposed score
// tile. Each lane's result is a fixed operation chain on that lane's data.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "anvil/kernels/cpu/attention_internal.h"
#include "anvil/kernels/cpu/simd.h"

namespace anvil::kernels::ANVIL_SIMD_NS::attention {

// ---- lane select: a >= b ? x : y ----------------------------------------------

inline F32x1 IfGe(F32x1 a, F32x1 b, F32x1 x, F32x1 y) { return {a.v >= b.v ? x.v : y.v}; }
#if ANVIL_SIMD_HAVE_AVX2
inline F32x8 IfGe(F32x8 a, F32x8 b, F32x8 x, F32x8 y) {
  return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ))};
}
#endif
#if ANVIL_SIMD_HAVE_AVX512
inline F32x16 IfGe(F32x16 a, F32x16 b, F32x16 x, F32x16 y) {
  return {_mm512_mask_blend_ps(_mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ), y.v, x.v)};
}
#endif

// ---- W x W transpose: dst[i * ldd + j] = src[j * lds + i] ------------------------

inline void TransposeBlock(F32x1, const float* src, int64_t, float* dst, int64_t) {
  dst[0] = src[0];
}
#if ANVIL_SIMD_HAVE_AVX2
// 8x8: unpack pairs of rows (ps), then pairs of pairs (pd), then 128-bit halves.
inline void TransposeBlock(F32x8, const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4g + k]: in 128-bit half h, column 4h + k of rows 4g..4g+3.
  for (int g = 0; g < 2; ++g) {
    const __m256d a = _mm256_castps_pd(t[4 * g]), b = _mm256_castps_pd(t[4 * g + 1]);
    const __m256d c = _mm256_castps_pd(t[4 * g + 2]), d = _mm256_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(b, d));
    r[4 * g + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(b, d));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * ldd, _mm256_permute2f128_ps(r[k], r[4 + k], 0x20));
    _mm256_storeu_ps(dst + (4 + k) * ldd, _mm256_permute2f128_ps(r[k], r[4 + k], 0x31));
  }
}
#endif
#if ANVIL_SIMD_HAVE_AVX512
// 16x16: as 8x8, then a 4x4 transpose of 128-bit lanes (two shuffle_f32x4 rounds).
inline void TransposeBlock(F32x16, const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // u[g][k] = r[4g + k]: in 128-bit lane L, column 4L + k of rows 4g..4g+3.
  for (int g = 0; g < 4; ++g) {
    const __m512d a = _mm512_castps_pd(t[4 * g]), b = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * g + 2]), d = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 v0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44);
    const __m512 v1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
    const __m512 v2 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
    _mm512_storeu_ps(dst + k * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
    _mm512_storeu_ps(dst + (4 + k) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xDD));
    _mm512_storeu_ps(dst + (8 + k) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
    _mm512_storeu_ps(dst + (12 + k) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xDD));
  }
}
#endif

// ---- exp2 -----------------------------------------------------------------------

// 2^x. x is clamped to [-127, 127]; n = rint(x) (adding 1.5 * 2^23 rounds);
// f = x - n in [-1/2, 1/2] (exact); 2^f = 1 + f * q(f) with q of degree 5,
// fitted for least relative error on [-1/2, 1/2] (1.6e-8 = 0.27 ulp with these
// f32 coefficients in exact arithmetic; Horner with FMAs adds about 1 ulp:
// attention_test.cc measures the total). 2^n is built in the exponent field:
// n = -127 gives 0, so results below 2^-126.5 flush to +0 and -inf -> +0, and
// 2^0 is exactly 1 (a block that changes no running max rescales by 1).
namespace exp2_detail {
inline constexpr float kRound = 12582912.0f;  // 1.5 * 2^23
inline constexpr uint32_t kRoundBits = 0x4B400000u;
inline constexpr float kC1 = 6.931471825e-01f;
inline constexpr float kC2 = 2.402264774e-01f;
inline constexpr float kC3 = 5.550332367e-02f;
inline constexpr float kC4 = 9.618436918e-03f;
inline constexpr float kC5 = 1.339888084e-03f;
inline constexpr float kC6 = 1.535338670e-04f;
// 2^n from kRound + n: the biased exponent n + 127 shifted into place.
inline constexpr uint32_t kBiasFix = 127u - kRoundBits;  // mod 2^32
}  // namespace exp2_detail

inline F32x1 Pow2FromRounded(F32x1 r) {
  return {simd_detail::FromBits((simd_detail::Bits(r.v) + exp2_detail::kBiasFix) << 23)};
}
#if ANVIL_SIMD_HAVE_AVX2
inline F32x8 Pow2FromRounded(F32x8 r) {
  const __m256i e = _mm256_add_epi32(_mm256_castps_si256(r.v),
                                     _mm256_set1_epi32(static_cast<int>(exp2_detail::kBiasFix)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(e, 23))};
}
#endif
#if ANVIL_SIMD_HAVE_AVX512
inline F32x16 Pow2FromRounded(F32x16 r) {
  const __m512i e = _mm512_add_epi32(_mm512_castps_si512(r.v),
                                     _mm512_set1_epi32(static_cast<int>(exp2_detail::kBiasFix)));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(e, 23))};
}
#endif

template <class V>
inline V Exp2(V x) {
  using namespace exp2_detail;
  x = Min(V::Set(127.0f), Max(V::Set(-127.0f), x));
  const V rounded = x + V::Set(kRound);
  const V f = x - (rounded - V::Set(kRound));
  V p = MulAdd(V::Set(kC6), f, V::Set(kC5));
  p = MulAdd(p, f, V::Set(kC4));
  p = MulAdd(p, f, V::Set(kC3));
  p = MulAdd(p, f, V::Set(kC2));
  p = MulAdd(p, f, V::Set(kC1));
  p = MulAdd(p, f, V::Set(1.0f));
  return p * Pow2FromRounded(rounded);
}

// ---- broadcast GEMM --------------------------------------------------------------

// C[x][j] for x < rows, j < lanes (a multiple of W):
//   C = init + sum_{k < kdim, in order} A(x, k) * B[k][j]    (one FMA per term)
// with A broadcast from any strides. init: kZero 0, kLoad C, kScaled C * cs[j]
// (one rounding). kMasked: term k is skipped in lane j unless
// lpos[j] >= kpos0 + k (causal blocks: key kpos0 + k is visible to row lpos[j]).
// Per tile of lanes the keys fall in three runs: seen by every lane (plain
// FMAs), by some (the lane-masked FMA, a compare and blend per product: at
// small's shape it made a causal block's O += V^T P 2.4x slower than a full
// one's) and by none (skipped); each lane gets the same FMAs in the same order
// as if every term went through the mask.
// All five FA2 matmuls have this shape: S^T = K Q'^T, dP^T = V dO^T (A = K/V
// rows), O^T += V^T P^T, dQ^T += K^T dS^T (A = K/V columns), dV += P^T dO,
// dK += dS^T Q (A = P^T/dS^T rows, B = dO/Q rows, lanes over HD).
enum class Init { kZero, kLoad, kScaled };

struct TileOperands {
  int kdim;
  const float* a;  // A(x, k) = a[x * sa + k * sk]
  int64_t sa;
  int64_t sk;
  const float* b;  // B[k][j] = b[k * ldb + j]
  int64_t ldb;
  float* c;  // C[x][j] = c[x * ldc + j]
  int64_t ldc;
  const float* cs = nullptr;    // kScaled: factor per lane
  const float* lpos = nullptr;  // kMasked, skip_unseen: row position per lane
  float kpos0 = 0;              // kMasked, skip_unseen: key position of k = 0
  // Without kMasked, causal zeros the caller vouches for, skipped: the
  // backward's masked P and dS entries are +-0, and their products would
  // leave accumulators that start at +0 (and so are never -0) unchanged.
  bool skip_unseen = false;  // keys no lane of a tile sees
  bool skip_early = false;   // row x's terms k < x + early_shift
  int early_shift = 0;
};

// A is row-major M (row stride ldm): C[x][j] (+)= sum_k M[x][k] B[k][j].
inline TileOperands ByRows(const float* m, int64_t ldm, int kdim, const float* b, int64_t ldb,
                           float* c, int64_t ldc) {
  return {kdim, m, ldm, 1, b, ldb, c, ldc};
}
// A is the transpose of row-major M: C[x][j] (+)= sum_k M[k][x] B[k][j].
inline TileOperands ByCols(const float* m, int64_t ldm, int kdim, const float* b, int64_t ldb,
                           float* c, int64_t ldc) {
  return {kdim, m, 1, ldm, b, ldb, c, ldc};
}

// Register tiles: kR broadcast rows x kNV vectors of accumulators.
template <class V>
struct Tune;
// Scalar: a 4x4 tile of floats.
template <>
struct Tune<F32x1> {
  static constexpr int kR = 4;
  static constexpr int kNV = 4;
};
#if ANVIL_SIMD_HAVE_AVX2
// 16 ymm: 6x2 = 12 accumulators + 2 B vectors + 1 broadcast.
template <>
struct Tune<F32x8> {
  static constexpr int kR = 6;
  static constexpr int kNV = 2;
};
#endif
#if ANVIL_SIMD_HAVE_AVX512
// 32 zmm: 6x4 = 24 accumulators + 4 B vectors + 1 broadcast. 24 independent
// chains cover 2 FMA pipes x 4 cycles of latency three times over; per k step
// 24 FMAs need 4 loads and 6 broadcasts, well within the load ports.
template <>
struct Tune<F32x16> {
  static constexpr int kR = 6;
  static constexpr int kNV = 4;
};
#endif

// Keys [0, *open) are visible to each of the `lanes` lanes at lpos, keys
// [*open, *shut) to some, keys [*shut, kdim) to none (kMasked's runs).
inline void VisibleRuns(const float* lpos, int lanes, float kpos0, int kdim, int* open, int* shut) {
  float lo = lpos[0];
  float hi = lpos[0];
  for (int j = 1; j < lanes; ++j) {
    lo = lpos[j] < lo ? lpos[j] : lo;
    hi = lpos[j] > hi ? lpos[j] : hi;
  }
  // Key k is visible to lane j iff lpos[j] >= kpos0 + k (all exact integers in f32).
  auto keys_upto = [&](float pos) {
    const float n = pos - kpos0 + 1.0f;
    return n <= 0.0f ? 0 : n >= static_cast<float>(kdim) ? kdim : static_cast<int>(n);
  };
  *open = keys_upto(lo);
  *shut = keys_upto(hi);
}

// One k step of MicroTile: acc[x][j] += A(x, k) * bv[j], lane-masked by lp
// against key position kp when kMaskedStep.
template <class V, int R, int NV, bool kMaskedStep>
inline void TileStep(V (&acc)[R][NV], const float* a, int64_t sa, const float* b, const V (&lp)[NV],
                     float kp) {
  constexpr int W = V::kLanes;
  V bv[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) bv[j] = V::Load(b + j * W);
  const V kpv = V::Set(kp);
#pragma GCC unroll 8
  for (int x = 0; x < R; ++x) {
    const V ax = V::Set(a[x * sa]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if constexpr (kMaskedStep) {
        acc[x][j] = IfGe(lp[j], kpv, MulAdd(ax, bv[j], acc[x][j]), acc[x][j]);
      } else {
        acc[x][j] = MulAdd(ax, bv[j], acc[x][j]);
      }
    }
  }
}

template <class V, int R, int NV, Init kInit, bool kMasked>
inline void MicroTile(const TileOperands& o) {
  constexpr int W = V::kLanes;
  V acc[R][NV];
  V lp[NV]{};
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) {
    V f = V::Set(1.0f);
    if constexpr (kInit == Init::kScaled) f = V::Load(o.cs + j * W);
    if constexpr (kMasked) lp[j] = V::Load(o.lpos + j * W);
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) {
      if constexpr (kInit == Init::kZero) {
        acc[x][j] = V::Zero();
      } else if constexpr (kInit == Init::kLoad) {
        acc[x][j] = V::Load(o.c + x * o.ldc + j * W);
      } else {
        acc[x][j] = V::Load(o.c + x * o.ldc + j * W) * f;
      }
    }
  }
  const float* a = o.a;
  const float* b = o.b;
  int open = o.kdim;
  int shut = o.kdim;
  if constexpr (kMasked) VisibleRuns(o.lpos, NV * W, o.kpos0, o.kdim, &open, &shut);
  int k = 0;
  for (; k < open; ++k, a += o.sk, b += o.ldb) {
    TileStep<V, R, NV, false>(acc, a, o.sa, b, lp, 0.0f);
  }
  for (; k < shut; ++k, a += o.sk, b += o.ldb) {
    TileStep<V, R, NV, true>(acc, a, o.sa, b, lp, o.kpos0 + static_cast<float>(k));
  }
#pragma GCC unroll 8
  for (int x = 0; x < R; ++x) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[x][j].Store(o.c + x * o.ldc + j * W);
  }
}

// The R x nv tile (nv <= Tune<V>::kNV vectors).
template <class V, int R, Init kInit, bool kMasked>
void MicroTileNv(int nv, const TileOperands& o) {
  constexpr int kNV = Tune<V>::kNV;
  static_assert(kNV <= 4, "the cases below cover up to 4 vectors");
  if (nv == 1) {
    MicroTile<V, R, 1, kInit, kMasked>(o);
  } else if (nv == 2) {
    if constexpr (kNV >= 2) MicroTile<V, R, 2, kInit, kMasked>(o);
  } else if (nv == 3) {
    if constexpr (kNV >= 3) MicroTile<V, R, 3, kInit, kMasked>(o);
  } else {
    if constexpr (kNV >= 4) MicroTile<V, R, 4, kInit, kMasked>(o);
  }
}

// The rows x nv block: full kR-row tiles, then one of the remaining rows.
template <class V, Init kInit, bool kMasked>
void MicroRows(int rows, int nv, TileOperands o) {
  constexpr int R = Tune<V>::kR;
  static_assert(R <= 6, "the cases below cover up to 6 rows");
  // The tile of rows from x0: skip_early's terms before its first row's.
  auto from = [&o](int x0) {
    TileOperands t = o;
    t.a += x0 * o.sa;
    t.c += x0 * o.ldc;
    if (o.skip_early) {
      const int k0 = x0 + o.early_shift <= 0 ? 0 : std::min(x0 + o.early_shift, o.kdim);
      t.a += k0 * o.sk;
      t.b += k0 * o.ldb;
      t.kdim -= k0;
    }
    return t;
  };
  int x0 = 0;
  for (; x0 + R <= rows; x0 += R) MicroTileNv<V, R, kInit, kMasked>(nv, from(x0));
  switch (rows - x0) {
    case 1:
      return MicroTileNv<V, 1, kInit, kMasked>(nv, from(x0));
    case 2:
      return MicroTileNv<V, 2, kInit, kMasked>(nv, from(x0));
    case 3:
      return MicroTileNv<V, 3, kInit, kMasked>(nv, from(x0));
    case 4:
      return MicroTileNv<V, 4, kInit, kMasked>(nv, from(x0));
    case 5:
      return MicroTileNv<V, 5, kInit, kMasked>(nv, from(x0));
    default:
      return;
  }
}

template <class V, Init kInit, bool kMasked>
void BcastGemm(int rows, int lanes, TileOperands o) {
  constexpr int W = V::kLanes;
  constexpr int NV = Tune<V>::kNV;
  for (int j0 = 0; j0 < lanes; j0 += NV * W) {
    const int nv = (lanes - j0) / W < NV ? (lanes - j0) / W : NV;
    TileOperands oj = o;
    oj.b += j0;
    oj.c += j0;
    if constexpr (kInit == Init::kScaled) oj.cs += j0;
    if (kMasked || o.skip_unseen) oj.lpos += j0;
    if (o.skip_unseen) {
      int open = 0;
      VisibleRuns(oj.lpos, nv * W, o.kpos0, o.kdim, &open, &oj.kdim);
    }
    MicroRows<V, kInit, kMasked>(rows, nv, oj);
  }
}

// ---- softmax passes over S^T [c][lane] (row stride ld) --------------------------

// Forward, NG lane vectors at once (independent chains). Masked scores become
// -inf; then per lane m' = max(m, max_c S), alpha = 2^(m - m'),
// S <- P = 2^(S - m'), l = l * alpha + (P_0 + P_1 + ...) in c order.
template <class V, int NG>
void OnlineSoftmaxGroup(float* s, int ld, int nc, bool diag, float start, const float* lpos,
                        float* m, float* l, float* alpha) {
  constexpr int W = V::kLanes;
  const V neg_inf = V::Set(-INFINITY);
  V lp[NG], mb[NG], mn[NG], sum[NG];
  for (int j = 0; j < NG; ++j) {
    lp[j] = V::Load(lpos + j * W);
    mb[j] = neg_inf;
  }
  for (int c = 0; c < nc; ++c) {
    const V kp = V::Set(start + static_cast<float>(c));
    for (int j = 0; j < NG; ++j) {
      V x = V::Load(s + c * ld + j * W);
      if (diag) {
        x = IfGe(lp[j], kp, x, neg_inf);
        x.Store(s + c * ld + j * W);
      }
      mb[j] = Max(mb[j], x);
    }
  }
  for (int j = 0; j < NG; ++j) {
    const V mo = V::Load(m + j * W);
    mn[j] = Max(mo, mb[j]);
    Exp2(mo - mn[j]).Store(alpha + j * W);
    mn[j].Store(m + j * W);
    sum[j] = V::Zero();
  }
  for (int c = 0; c < nc; ++c) {
    for (int j = 0; j < NG; ++j) {
      const V p = Exp2(V::Load(s + c * ld + j * W) - mn[j]);
      p.Store(s + c * ld + j * W);
      sum[j] = sum[j] + p;
    }
  }
  for (int j = 0; j < NG; ++j) {
    MulAdd(V::Load(l + j * W), V::Load(alpha + j * W), sum[j]).Store(l + j * W);
  }
}

template <class V>
void OnlineSoftmax(float* s, int ld, int nc, int lw, bool diag, float start, const float* lpos,
                   float* m, float* l, float* alpha) {
  constexpr int W = V::kLanes;
  constexpr int kGroup = 4;
  for (int j0 = 0; j0 < lw; j0 += kGroup * W) {
    const int ng = (lw - j0) / W < kGroup ? (lw - j0) / W : kGroup;
    float* sj = s + j0;
    switch (ng) {
      case 1:
        OnlineSoftmaxGroup<V, 1>(sj, ld, nc, diag, start, lpos + j0, m + j0, l + j0, alpha + j0);
        break;
      case 2:
        OnlineSoftmaxGroup<V, 2>(sj, ld, nc, diag, start, lpos + j0, m + j0, l + j0, alpha + j0);
        break;
      case 3:
        OnlineSoftmaxGroup<V, 3>(sj, ld, nc, diag, start, lpos + j0, m + j0, l + j0, alpha + j0);
        break;
      default:
        OnlineSoftmaxGroup<V, 4>(sj, ld, nc, diag, start, lpos + j0, m + j0, l + j0, alpha + j0);
        break;
    }
  }
}

// Backward: S <- P = 2^(S - lse2) (masked: 0), dP <- dS = P * (dP - D) * scale.
template <class V>
void SoftmaxGrad(float* s, float* dp, int ld, int nc, int lw, bool diag, float start,
                 const float* lpos, const float* lse2, const float* dsum, float scale) {
  constexpr int W = V::kLanes;
  const V neg_inf = V::Set(-INFINITY);
  const V sc = V::Set(scale);
  for (int j = 0; j < lw; j += W) {
    const V lp = V::Load(lpos + j);
    const V ls = V::Load(lse2 + j);
    const V dd = V::Load(dsum + j);
    for (int c = 0; c < nc; ++c) {
      V x = V::Load(s + c * ld + j);
      if (diag) x = IfGe(lp, V::Set(start + static_cast<float>(c)), x, neg_inf);
      const V p = Exp2(x - ls);
      p.Store(s + c * ld + j);
      ((p * (V::Load(dp + c * ld + j) - dd)) * sc).Store(dp + c * ld + j);
    }
  }
}

}  // namespace anvil::kernels::ANVIL_SIMD_NS::attention
