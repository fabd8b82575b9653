// The integer GEMM's per-tier panel kernels (gemm_int.h). A task is one
// 16-column panel of the packed weights times up to `max_rows` activation
// rows; it is plain data, so the ISA units call no inline code of other
// headers (see simd.h).
#pragma once

#include <cstdint>

namespace anvil::kernels::gemm_int_internal {

struct PanelTask {
  // Weights: the panel's 64-byte lines (4 k of int8 or 8 k of int4 for its
  // 16 columns), `lines` of them; scales [groups] rows of `scale_stride`
  // floats from the panel's first column; int8's column sums likewise.
  const uint8_t* lines_data = nullptr;
  int64_t lines = 0;
  int64_t lines_per_group = 0;  // int4: 16 (128 / 8); int8: all
  int64_t groups = 0;
  const float* scales = nullptr;
  int64_t scale_stride = 0;
  const int32_t* column_sums = nullptr;
  // Activations: rows of `ld` codes, signed and offset by 128 (null where
  // the tier's kernels read only the other kind: Kernels::int8_rows), their
  // scales and per-group sums (`groups` per row, int4).
  const int8_t* q = nullptr;
  const uint8_t* q_u8 = nullptr;
  int64_t ld = 0;
  const float* row_scales = nullptr;
  const int32_t* group_sums = nullptr;
  int64_t rows = 0;
  // Output: rows x columns (<= 16) of y.
  float* y = nullptr;
  int64_t ldy = 0;
  int columns = 16;
  bool accumulate = false;
  // A wide task (Kernels::int8_wide): `panels` consecutive panels, each
  // panel_bytes after the last; `columns` counts the last panel's only.
  int panels = 1;
  int64_t panel_bytes = 0;
  // The weights come from DRAM: the one-panel kernels ask for each line
  // kPrefetchLines ahead of the one they read (else for the one they read,
  // which is there).
  int64_t prefetch_bytes = 0;
};

using PanelFn = void (*)(const PanelTask& task);

// How far ahead of the weight line it reads a panel kernel asks for one
// from DRAM (PanelTask::prefetch_bytes; into L1): 2 KiB, past a panel's end
// into the next panel's, which a thread reads next (GemmInt hands each
// thread consecutive panels). Decode rows read the weights once; the
// hardware's prefetchers left them waiting: Zen 5, 8 x 32768 x 4096 w4a8
// 468 -> 865 GOP/s. From the caches the same prefetches cost 1-3%.
inline constexpr int64_t kPrefetchLines = 32;
// The activation codes a tier's int8 kernels read (int4's read the signed
// ones and the group sums on every tier).
enum class Int8Rows : uint8_t { kSigned, kUnsigned, kBoth };
struct Kernels {
  PanelFn int8 = nullptr;
  PanelFn int4 = nullptr;
  int max_rows = 1;  // rows per task
  // Optional, for many rows: int8 on `wide_panels` panels x up to `wide_rows`
  // rows at once (fewer loads per multiply-add than one panel of max_rows).
  PanelFn int8_wide = nullptr;
  int wide_panels = 1;
  int wide_rows = 1;
  PanelFn int4_wide = nullptr;  // the same for int4
  // Optional: called on each thread before its first task and after its
  // last (AMX: the tile configuration, which is per thread).
  void (*enter)() = nullptr;
  void (*leave)() = nullptr;
  Int8Rows int8_rows = Int8Rows::kSigned;
};

const Kernels& Avx2Kernels();
const Kernels& AvxVnniKernels();  // the AVX2 tier's with AVX-VNNI (the same bits)
const Kernels& Avx512Kernels();   // needs AVX512_VNNI
// Avx512Kernels' with many rows on AMX-INT8 tiles (the same bits);
// needs AMX_INT8 and the tile permission (AmxEnabled).
const Kernels& AmxKernels();

// Activation rows' codes (QuantizeRowsInt8), per tier: the scalar tier in
// gemm_int.cc, gemm_int_rows_avx2.cc, gemm_int_rows_avx512.cc. Every tier
// gives the same bits: the max is exact in any order, and each code is one
// multiply, a clamp and a round to nearest even (exact integers).
inline constexpr int64_t kRowGroup = 128;  // gemm_int.h's kInt4Group
struct RowQuantizer {
  // max |x[i]| over i < k; NaN when any x[i] is not finite.
  float (*amax)(const float* x, int64_t k);
  // q[i] = rne(clamp(x[i] * inv, -127, 127)) for i < k, 0 for k <= i < ld
  // (a multiple of 64); q_u8[i] = q[i] + 128; sums[g] = the sum of q over
  // group g of kRowGroup for every group that starts below k. q or q_u8
  // null: not written (the GEMM does not read it). Each x[i] * inv must be
  // finite (the caller zeroes the rows where it would not be).
  void (*encode)(const float* x, int64_t k, int64_t ld, float inv, int8_t* q, uint8_t* q_u8,
                 int32_t* sums);
};
const RowQuantizer& Avx2RowQuantizer();
const RowQuantizer& Avx512RowQuantizer();

}  // namespace anvil::kernels::gemm_int_internal
