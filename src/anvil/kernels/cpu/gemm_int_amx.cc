// AMX-INT8 kernel of the integer GEMM (gemm_int.h): W8A8 on two 16-column
// panels x 32 rows, a 32 x 32 block of int32 sums held in four accumulator
// tiles. tdpbssd multiplies signed bytes by signed bytes, 16 rows x 64 k x
// 16 columns in one instruction, so both operands are read where they lie:
// the activations' codes as QuantizeRowsInt8 stores them (rows of `ld`
// bytes, a multiple of 64, zero past k) and the weights as IntWeights packs
// them (a panel's 64-byte lines, 4 k of its 16 columns each, are a B tile's
// rows: 16 lines make a tile). The last K tile may run past a panel's lines
// into the next panel or IntWeights' zeroed tail; the activations are zero
// there, so those products add exact zeros.
//
// The sums are exact integers and the epilogue is the VNNI kernels' (f32 of
// the sum, times the column's scale, times the row's), so the outputs are
// their bits; rows a whole tile does not cover go to those kernels.
// GCC 12 warns inside its own AVX-512 intrinsics (PR 105593); not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "anvil/core/amx_tiles.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

constexpr int kPanels = 2;             // a task's columns: two panels of 16
constexpr int kRows = 32;              // a task's rows: two tiles of 16
constexpr int64_t kLinesPerTile = 16;  // a B tile: 16 lines of 4 k (64 k)
constexpr int64_t kTileBytes = kLinesPerTile * 64;

// The sums of 32 rows of codes at q (rows ld bytes apart), or (kHalf) of
// their first 16, with the two panels' lines at w0 and w1 over `tiles` K
// tiles: rows 0-15 in tiles 0 (panel 0) and 1 (panel 1), rows 16-31 in 2
// and 3.
template <bool kHalf>
void Accumulate(const int8_t* q, int64_t ld, const uint8_t* w0, const uint8_t* w1, int64_t tiles) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (!kHalf) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t s = 0; s < tiles; ++s) {
    _tile_loadd(4, q + s * 64, ld);
    _tile_loadd(6, w0 + s * kTileBytes, 64);
    _tile_loadd(7, w1 + s * kTileBytes, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    if constexpr (!kHalf) {
      _tile_loadd(5, q + 16 * ld + s * 64, ld);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
  }
}

// y rows [r0, r0 + rows) of both panels (y [+]= f32(sum) * s_w * s_a) from
// their sums, [rows][32] int32.
void Store(const PanelTask& t, int64_t r0, int rows, const int32_t* sums) {
  for (int p = 0; p < kPanels; ++p) {
    const int columns = p + 1 < kPanels ? 16 : t.columns;
    const __mmask16 mask = static_cast<__mmask16>((1u << columns) - 1);
    const __m512 sw = _mm512_loadu_ps(t.scales + p * 16);
    float* y = t.y + r0 * t.ldy + p * 16;
    for (int r = 0; r < rows; ++r, y += t.ldy) {
      const __m512 f = _mm512_cvtepi32_ps(_mm512_load_si512(sums + r * 32 + p * 16));
      __m512 out = _mm512_mul_ps(_mm512_mul_ps(f, sw), _mm512_set1_ps(t.row_scales[r0 + r]));
      if (t.accumulate) out = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), out);
      _mm512_mask_storeu_ps(y, mask, out);
    }
  }
}

// Rows [r0, t.rows) of the task on the VNNI one-panel kernel.
void Rest(const PanelTask& t, int64_t r0) {
  const Kernels& vnni = Avx512Kernels();
  for (int p = 0; p < kPanels; ++p) {
    PanelTask one = t;
    one.panels = 1;
    one.lines_data = t.lines_data + p * t.panel_bytes;
    one.scales = t.scales + p * 16;
    one.column_sums = t.column_sums + p * 16;
    one.columns = p + 1 < kPanels ? 16 : t.columns;
    for (int64_t r = r0; r < t.rows; r += vnni.max_rows) {
      one.rows = t.rows - r < vnni.max_rows ? t.rows - r : vnni.max_rows;
      one.q = t.q + r * t.ld;
      one.q_u8 = t.q_u8 + r * t.ld;
      one.row_scales = t.row_scales + r;
      one.group_sums = t.group_sums + r * t.groups;
      one.y = t.y + r * t.ldy + p * 16;
      vnni.int8(one);
    }
  }
}

// Up to 32 rows: a whole tile pair, or a tile of 16 and the VNNI kernel for
// the rest. (Issuing the next 32 rows' tile instructions before this
// block's epilogue, so the two could overlap, gained 1-3%: not kept.)
void Int8Tiles(const PanelTask& t) {
  const int64_t tiles = (t.lines + kLinesPerTile - 1) / kLinesPerTile;
  const uint8_t* w0 = t.lines_data;
  const uint8_t* w1 = w0 + t.panel_bytes;
  alignas(64) int32_t sums[kRows * 32];
  int rows = 0;
  if (t.rows == kRows) {
    Accumulate<false>(t.q, t.ld, w0, w1, tiles);
    _tile_stored(2, sums + 16 * 32, 128);
    _tile_stored(3, sums + 16 * 32 + 16, 128);
    rows = kRows;
  } else if (t.rows >= 16) {
    Accumulate<true>(t.q, t.ld, w0, w1, tiles);
    rows = 16;
  }
  if (rows > 0) {
    _tile_stored(0, sums, 128);
    _tile_stored(1, sums + 16, 128);
    Store(t, 0, rows, sums);
  }
  if (rows < t.rows) Rest(t, rows);
}

}  // namespace

const Kernels& AmxKernels() {
  static const Kernels kKernels = [] {
    Kernels k = Avx512Kernels();  // few rows and int4
    k.int8_wide = Int8Tiles;
    k.wide_panels = kPanels;
    k.wide_rows = kRows;
    k.enter = [] { ConfigureAmxTiles(); };
    k.leave = [] { _tile_release(); };
    return k;
  }();
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
