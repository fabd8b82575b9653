// Integer inference GEMMs: W8A8 (int8 weights with a scale per output
// channel, int8 activations with a scale per token row, quantized
// dynamically) and W4A8 (int4 weights with a scale per group of 128 along K,
// the same int8 activations). y[m, n] (+)= x[m, k] · w[k, n], the weights
// quantized once (QuantizeWeightsInt), the activations per call
// (QuantizeRowsInt8).
//
// Quantization is symmetric, round to nearest even:
//   activations  s_a(i) = amax_i / 127,  qa = rne(x * (127 / amax_i)) in [-127, 127]
//   int8 weights s_w(j) = amax_j / 127 over column j,       qw in [-127, 127]
//   int4 weights s_w(g, j) = amax / 7 over rows [128 g, 128 g + 128) of column j, qw in [-7, 7]
// (an all-zero row or group gets scale 0 and codes 0; a row with an Inf or NaN
// gets a NaN scale, so the outputs it touches are NaN: overflow shows).
//
// The result, the same bits on every ISA tier and thread count (the products
// are summed exactly in int32, and the f32 epilogue has one fixed order):
//   acc(g)  = sum over k in group g of qa[i, k] * qw[k, j]         (exact)
//   s       = 0; for g in increasing order: s = fma(f32(acc(g)), s_w(g, j), s)
//   y[i, j] = [y[i, j] +] s * s_a(i)
// f32(acc) is the round-to-nearest conversion. An int8 weight has one group
// (k <= 65536, so the sum fits int32 on every tier). A row's result never
// depends on the other rows: batch invariant.
//
// Kernels: vpdpbusd on AVX-512 with AVX512_VNNI (u8 x s8: the activation
// offset by 128 for int8 weights, the int4 code offset by 8 as the unsigned
// side for int4, both corrected exactly in int32); AVX2 uses vpmaddubsw on
// |qa| and the weight with qa's sign (|products| <= 2 * 127 * 127 < 2^15: no
// saturation); the scalar tier sums in int32 directly. Where the context
// uses AMX (KernelCtx::amx) and the CPU has AMX-INT8, whole tiles of 16
// rows run on tdpbssd (s8 x s8, no offset; int4 codes unpacked to int8 a
// group at a time): the same sums.
#pragma once

#include <cstdint>

#include "anvil/core/aligned_buffer.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

enum class IntBits : uint8_t { kInt8, kInt4 };
inline constexpr int64_t kInt4Group = 128;

// Weights W [k, n] quantized and packed for every tier's kernel: column
// panels of 16, each a run of 64-byte lines along K; a line holds 4 k
// (int8) or 8 k (int4, two codes a byte) of the panel's 16 columns; zero
// bytes follow the last panel (a tile read may pass its end).
class IntWeights {
 public:
  IntWeights() = default;
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  IntBits bits() const { return bits_; }
  int64_t group() const { return group_; }   // K extent of a scale group
  int64_t groups() const { return groups_; }
  // Bytes of codes and scales (what a GEMM call streams).
  int64_t bytes() const;

  // The code qw[kk, j] and scale s_w(g, j), read back (tests and the oracle).
  int Code(int64_t kk, int64_t j) const;
  float Scale(int64_t g, int64_t j) const { return scales_[g * padded_n() + j]; }

  // Internal layout, for the kernels.
  int64_t padded_n() const { return (n_ + 15) / 16 * 16; }
  int64_t k_per_line() const { return bits_ == IntBits::kInt8 ? 4 : 8; }
  int64_t lines() const { return (k_ + k_per_line() - 1) / k_per_line(); }  // per panel
  const uint8_t* panel(int64_t p) const {
    return reinterpret_cast<const uint8_t*>(codes_.data()) + p * lines() * 64;
  }
  const float* scales() const { return scales_; }        // [groups, padded_n]
  const int32_t* column_sums() const { return sums_; }   // int8: sum over k of qw[k, j]

 private:
  friend IntWeights QuantizeWeightsInt(const KernelCtx&, int64_t, int64_t, const float*, int64_t,
                                       IntBits);
  int64_t k_ = 0, n_ = 0, group_ = 0, groups_ = 0;
  IntBits bits_ = IntBits::kInt8;
  AlignedBuffer codes_;  // [panels, lines, 64]
  AlignedBuffer extra_;  // scales then column sums
  float* scales_ = nullptr;
  int32_t* sums_ = nullptr;
};

// w [k, n] (row stride ldw >= n; 0: n), quantized as the header says.
IntWeights QuantizeWeightsInt(const KernelCtx& ctx, int64_t k, int64_t n, const float* w,
                              int64_t ldw, IntBits bits);

// Activations x [m, k] quantized per row, in caller memory of
// IntRowsBytes(m, k) bytes (64-byte aligned). With `for_weights`, the rows
// of one GemmInt call of those weights on `ctx`: only the codes its kernels
// read are written (the other pointer is null); without, both.
struct IntRows {
  int64_t m = 0, k = 0;
  int64_t ld = 0;                // padded row length of q and q_u8 (multiple of 64)
  int8_t* q = nullptr;           // [m, ld]  codes, zero past k
  uint8_t* q_u8 = nullptr;       // [m, ld]  codes + 128 (the unsigned operand of vpdpbusd)
  float* scales = nullptr;       // [m]      s_a
  int32_t* group_sums = nullptr; // [m, ceil(k / 128)]  sum of codes per int4 group
};
size_t IntRowsBytes(int64_t m, int64_t k);
IntRows QuantizeRowsInt8(const KernelCtx& ctx, int64_t m, int64_t k, const float* x, int64_t ldx,
                         void* memory, const IntWeights* for_weights = nullptr);

// y[m, n] (+)= dequantized(a) · dequantized(w) as the header defines; y's
// row stride ldy >= n (0: n). a.k must equal w.k().
void GemmInt(const KernelCtx& ctx, const IntRows& a, const IntWeights& w, float* y, int64_t ldy,
             bool accumulate);

}  // namespace anvil::kernels
