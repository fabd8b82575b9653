// FP8 quantization: argument checks, the tier dispatch, the thread split and
// the scale rules, plus the portable tier (F32x1); the fused scale-and-cast
// kernels are in quant_impl.h. See quant.h.
#include "anvil/kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/quant_impl.h"
#include "anvil/kernels/cpu/rowwise_parallel.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace quant_internal {

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = ANVIL_SIMD_NS::quant::MakeKernels<ANVIL_SIMD_NS::F32x1>();
  return kKernels;
}

}  // namespace quant_internal

namespace {

using quant_internal::Kernels;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Elements per task of the flat (tensorwise) kernels; the amax partition
// does not change the result (a max is exact in any order).
constexpr int64_t kChunk = int64_t{1} << 14;
// Columns per task of the transposed kernel: its scratch is block x
// kColumnChunk bytes, transposed into the output.
constexpr int64_t kColumnChunk = 64;

const Kernels& KernelsFor(Isa isa) {
  return rowwise_internal::KernelsForTier(isa, quant_internal::ScalarKernels,
                                          quant_internal::Avx2Kernels,
                                          quant_internal::Avx512Kernels);
}

template <typename T>
T* Scratch(const KernelCtx& ctx, int thread, int64_t count) {
  CHECK_LE(static_cast<size_t>(count) * sizeof(T), ctx.scratch_bytes())
      << "quantize: the kernel context's per-thread scratch is too small";
  return reinterpret_cast<T*>(ctx.scratch(thread));
}

bool IsE5M2(Fp8Format format) { return format == Fp8Format::kE5M2; }

// NaN-aware max: a NaN anywhere wins.
float MaxOrNaN(float a, float b) { return (a != a || b != b) ? kNaN : std::max(a, b); }

using ANVIL_SIMD_NS::quant::ScaleOfBlock;

quant_internal::RowQuant RowQuantOf(const BlockQuant& b) {
  return {b.block, b.scale, b.format == Fp8Format::kE5M2, Fp8Max(b.format),
          Fp8MaxExponent(b.format)};
}

void StoreScale(QuantScales out, int64_t i, const ANVIL_SIMD_NS::quant::BlockScaleOf& s) {
  if (out.f32 != nullptr) out.f32[i] = s.s;
  if (out.e8m0 != nullptr) out.e8m0[i] = s.e8m0;
}

void CheckBlockArgs(int64_t rows, int64_t cols, const float* x, const BlockQuant& b,
                    const uint8_t* q, QuantScales scales) {
  CHECK(rows >= 0 && cols >= 0) << "quantize: shape " << rows << " x " << cols;
  CHECK_GT(b.block, 0) << "quantize: block size";
  CHECK(rows * cols == 0 || (x != nullptr && q != nullptr)) << "quantize: null buffers";
  const bool mx = b.scale != BlockScale::kAmax;
  CHECK(rows * cols == 0 || (mx ? (scales.e8m0 != nullptr && scales.f32 == nullptr)
                                : (scales.f32 != nullptr && scales.e8m0 == nullptr)))
      << "quantize: the " << (mx ? "MX rules write E8M0 scales" : "amax rule writes f32 scales");
}

}  // namespace

float Fp8Max(Fp8Format format) { return format == Fp8Format::kE4M3 ? 448.0f : 57344.0f; }
int Fp8MaxExponent(Fp8Format format) { return format == Fp8Format::kE4M3 ? 8 : 15; }

float Amax(const KernelCtx& ctx, int64_t n, const float* x) {
  ANVIL_TRACE_ZONE("quant_amax");
  CHECK(n >= 0 && (n == 0 || x != nullptr)) << "Amax: " << n << " elements";
  const Kernels& k = KernelsFor(ctx.isa());
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<float> partial(static_cast<size_t>(chunks), 0.0f);
  rowwise_internal::ParallelFor(ctx, chunks, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      partial[i] = k.amax(x + i * kChunk, std::min(kChunk, n - i * kChunk));
    }
  });
  float amax = 0.0f;
  for (const float p : partial) amax = MaxOrNaN(amax, p);
  return amax;
}

float TensorScale(float amax, Fp8Format format, int margin) {
  if (amax == 0.0f || !std::isfinite(amax)) return 1.0f;
  const float s = Fp8Max(format) / amax / std::ldexp(1.0f, margin);
  return std::isfinite(s) ? s : std::numeric_limits<float>::max();
}

void QuantizeTensor(const KernelCtx& ctx, int64_t n, const float* x, float scale, Fp8Format format,
                    uint8_t* q) {
  ANVIL_TRACE_ZONE("quant_tensor");
  CHECK(n >= 0 && (n == 0 || (x != nullptr && q != nullptr))) << "QuantizeTensor: buffers";
  const Kernels& k = KernelsFor(ctx.isa());
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  rowwise_internal::ParallelFor(ctx, chunks, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i * kChunk;
      k.scale_cast(x + b, std::min(kChunk, n - b), scale, /*divide=*/false, IsE5M2(format), q + b);
    }
  });
}

void QuantizeTensorTransposed(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                              float scale, Fp8Format format, uint8_t* q_t) {
  ANVIL_TRACE_ZONE("quant_tensor_transposed");
  CHECK(rows >= 0 && cols >= 0 && (rows * cols == 0 || (x != nullptr && q_t != nullptr)))
      << "QuantizeTensorTransposed: buffers";
  const Kernels& k = KernelsFor(ctx.isa());
  constexpr int64_t kRowBlock = 128;
  const int64_t chunks = (cols + kColumnChunk - 1) / kColumnChunk;
  rowwise_internal::ParallelFor(ctx, chunks, [&](int64_t begin, int64_t end, int t) {
    uint8_t* codes = Scratch<uint8_t>(ctx, t, kRowBlock * kColumnChunk);  // [rows, width]
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c0 = i * kColumnChunk, width = std::min(kColumnChunk, cols - c0);
      for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int64_t len = std::min(kRowBlock, rows - r0);
        for (int64_t r = 0; r < len; ++r) {
          k.scale_cast(x + (r0 + r) * cols + c0, width, scale, /*divide=*/false, IsE5M2(format),
                       codes + r * width);
        }
        k.transpose_codes(codes, len, width, q_t + c0 * rows + r0, rows);
      }
    }
  });
}

void QuantizeRows(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                  const BlockQuant& quant, uint8_t* q, QuantScales scales) {
  ANVIL_TRACE_ZONE("quant_rows");
  CheckBlockArgs(rows, cols, x, quant, q, scales);
  const Kernels& k = KernelsFor(ctx.isa());
  const int64_t nb = (cols + quant.block - 1) / quant.block;
  const quant_internal::RowQuant rq = RowQuantOf(quant);
  rowwise_internal::ParallelFor(ctx, rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      k.quantize_row(x + r * cols, cols, rq, q + r * cols,
                     scales.f32 != nullptr ? scales.f32 + r * nb : nullptr,
                     scales.e8m0 != nullptr ? scales.e8m0 + r * nb : nullptr);
    }
  });
}

void QuantizeColumnsTransposed(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                               const BlockQuant& quant, uint8_t* q_t, QuantScales scales) {
  ANVIL_TRACE_ZONE("quant_columns_transposed");
  CheckBlockArgs(rows, cols, x, quant, q_t, scales);
  const Kernels& k = KernelsFor(ctx.isa());
  const int64_t nb = (rows + quant.block - 1) / quant.block;
  const int64_t chunks = (cols + kColumnChunk - 1) / kColumnChunk;
  rowwise_internal::ParallelFor(ctx, chunks, [&](int64_t begin, int64_t end, int t) {
    // [kColumnChunk] amax and scales, then the [block, kColumnChunk] codes.
    float* amax = Scratch<float>(ctx, t, 2 * kColumnChunk + (quant.block * kColumnChunk + 3) / 4);
    float* s = amax + kColumnChunk;
    uint8_t* codes = reinterpret_cast<uint8_t*>(s + kColumnChunk);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c0 = i * kColumnChunk, width = std::min(kColumnChunk, cols - c0);
      for (int64_t j = 0; j < nb; ++j) {
        const int64_t r0 = j * quant.block, len = std::min(quant.block, rows - r0);
        const float* xb = x + r0 * cols + c0;
        k.column_amax(xb, cols, len, width, amax);
        for (int64_t c = 0; c < width; ++c) {
          const auto sc = ScaleOfBlock(amax[c], Fp8Max(quant.format), Fp8MaxExponent(quant.format),
                                       quant.scale);
          StoreScale(scales, (c0 + c) * nb + j, sc);
          s[c] = sc.s;
        }
        k.divide_cast_columns(xb, cols, len, width, s, IsE5M2(quant.format), codes);
        k.transpose_codes(codes, len, width, q_t + c0 * rows + r0, rows);
      }
    }
  });
}

void QuantizeTiles(const KernelCtx& ctx, int64_t rows, int64_t cols, const float* x,
                   Fp8Format format, int64_t tile, uint8_t* q, float* scales) {
  ANVIL_TRACE_ZONE("quant_tiles");
  const BlockQuant quant{.format = format, .scale = BlockScale::kAmax, .block = tile};
  CheckBlockArgs(rows, cols, x, quant, q, {.f32 = scales});
  const Kernels& k = KernelsFor(ctx.isa());
  const int64_t nr = (rows + tile - 1) / tile, nc = (cols + tile - 1) / tile;
  rowwise_internal::ParallelFor(ctx, nr, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r0 = i * tile, h = std::min(tile, rows - r0);
      for (int64_t j = 0; j < nc; ++j) {
        const int64_t c0 = j * tile, w = std::min(tile, cols - c0);
        float amax = 0.0f;
        for (int64_t r = r0; r < r0 + h; ++r) amax = MaxOrNaN(amax, k.amax(x + r * cols + c0, w));
        scales[i * nc + j] = ScaleOfBlock(amax, Fp8Max(format), 0, BlockScale::kAmax).s;
      }
      for (int64_t r = r0; r < r0 + h; ++r) {
        for (int64_t j = 0; j < nc; ++j) {
          const int64_t c0 = j * tile, w = std::min(tile, cols - c0);
          k.scale_cast(x + r * cols + c0, w, scales[i * nc + j], /*divide=*/true, IsE5M2(format),
                       q + r * cols + c0);
        }
      }
    }
  });
}

}  // namespace anvil::kernels
