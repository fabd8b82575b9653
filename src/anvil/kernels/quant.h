// FP8 quantization for low-precision GEMM operands: amax, scales and the
// saturating cast, tensorwise (Transformer Engine's current scaling),
// blockwise (DeepSeek-V3: 1 x 128 tiles for activations and gradients,
// 128 x 128 for weights) and MXFP8 (OCP MX v1.0: blocks of 32 with an E8M0
// shared scale, or NVIDIA's round-up variant).
//
// Every result is exact f32 arithmetic defined below (a division or product
// per element, correctly rounded, then core's RNE saturating cast), so each
// tier gives the scalar oracle's bits (kernels/ref/quant_ref.h) and results do
// not depend on the thread count. A block that holds an infinity or a NaN gets
// a NaN scale (and NaN elements): overflow is detected, never hidden.
#pragma once

#include <cstdint>

#include "anvil/kernels/ctx.h"

namespace anvil::kernels {

enum class Fp8Format : uint8_t {
  kE4M3,  // max 448, for weights and activations (and gradients in DeepSeek-V3's recipe)
  kE5M2,  // max 57344, the wider range for gradients
};
float Fp8Max(Fp8Format format);        // 448 or 57344
int Fp8MaxExponent(Fp8Format format);  // emax of an element: 8 (E4M3) or 15 (E5M2)

// max |x[i]| over n elements; NaN when any element is an infinity or a NaN.
float Amax(const KernelCtx& ctx, int64_t n, const float* x);

// Tensorwise current scaling (Transformer Engine): scale = fp8_max / amax /
// 2^margin in f32, and 1 when amax is 0 or not finite (the caller decides
// what a non-finite amax means: Amax already reported it).
float TensorScale(float amax, Fp8Format format, int margin = 0);
// q[i] = fp8(x[i] * scale), round to nearest even, saturating to +-max; the
// dequantized value is q * (1 / scale).
void QuantizeTensor(const KernelCtx& ctx, int64_t n, const float* x, float scale, Fp8Format format,
                    uint8_t* q);

// The same of x [rows, cols], written transposed: q_t[c, r] = fp8(x[r, c] *
// scale), q_t [cols, rows] (a weight-gradient operand under tensorwise scaling).
void QuantizeTensorTransposed(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                              float scale, Fp8Format format, uint8_t* q_t);

// How a block's scale s (the dequantization factor: x ~ q * s) comes from its amax.
enum class BlockScale : uint8_t {
  kAmax,       // s = amax / fp8_max in f32 (1 for an all-zero block; the least f32
               // where the quotient underflows): DeepSeek-V3
  kMxOcp,      // s = 2^(floor(log2 amax) - emax), an E8M0 code (2^-127 for an all-zero
               // block): OCP MX v1.0; elements above fp8_max saturate
  kMxRoundUp,  // s = 2^ceil(log2(amax / fp8_max)) (the f32 quotient rounded up to a
               // power of two, as cvt.rp.satfinite.ue8m0 does): nothing saturates
};
struct BlockQuant {
  Fp8Format format = Fp8Format::kE4M3;
  BlockScale scale = BlockScale::kAmax;
  int64_t block = 128;  // elements per block along the blocked axis (MX: 32)
};
// Where the scales go: `f32` for kAmax, `e8m0` (one byte per block) for the MX rules.
struct QuantScales {
  float* f32 = nullptr;
  uint8_t* e8m0 = nullptr;
};

// Blocks along each row of x [rows, cols] (row-major): block b of row r is
// columns [b * block, min(cols, (b + 1) * block)), scale index r * nb + b with
// nb = ceil(cols / block); q[r, c] = fp8(x[r, c] / s), q [rows, cols]. The
// operand layout of a forward GEMM's activations (K along the row).
void QuantizeRows(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                  const BlockQuant& quant, uint8_t* q, QuantScales scales);

// Blocks along each column, written transposed: block b of column c is rows
// [b * block, ...), scale index c * nb + b with nb = ceil(rows / block);
// q_t[c, r] = fp8(x[r, c] / s), q_t [cols, rows]. The weight-gradient GEMM's
// operands (its K is the token rows), quantized from the unquantized tensor
// in one pass.
void QuantizeColumnsTransposed(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                               const BlockQuant& quant, uint8_t* q_t, QuantScales scales);

// Square tiles (DeepSeek-V3's 128 x 128 weight blocks, kAmax rule): tile
// (i, j) covers rows [i * tile, ...) and columns [j * tile, ...), scale index
// i * ceil(cols / tile) + j; q [rows, cols].
void QuantizeTiles(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                   Fp8Format format, int64_t tile, uint8_t* q, float* scales);

}  // namespace anvil::kernels
