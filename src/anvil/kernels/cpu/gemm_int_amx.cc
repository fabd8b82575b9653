// AMX-INT8 kernels of the integer GEMM (gemm_int.h): W8A8 and W4A8 on two
// 16-column panels x 32 rows, a 32 x 32 block of int32 sums held in four accumulator
// tiles. tdpbssd multiplies signed bytes by signed bytes, 16 rows x 64 k x
// 16 columns in one instruction, so both operands are read where they lie:
// the activations' codes as QuantizeRowsInt8 stores them (rows of `ld`
// bytes, a multiple of 64, zero past k) and the weights as IntWeights packs
// them (a panel's 64-byte lines, 4 k of its 16 columns each, are a B tile's
// rows: 16 lines make a tile). The last K tile may run past a panel's lines
// into the next panel or IntWeights' zeroed tail; the activations are zero
// there, so those products add exact zeros. W4A8 unpacks each group's
// nibbles into int8 tiles first (Int4Tiles).
//
// The sums are exact integers and the epilogue is the VNNI kernels' (f32 of
// the sum, times the column's scale, times the row's), so the outputs are
// their bits; rows a whole tile does not cover go to those kernels.
#include <cstdint>

#include "anvil/core/amx_tiles.h"
#include "anvil/core/intrinsics.h"
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

// Rows [r0, t.rows) of the task on the VNNI one-panel kernels.
void Rest(const PanelTask& t, int64_t r0, bool int4) {
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
      // Either kind of rows may be absent (Int8Rows; int4 reads signed only).
      one.q = t.q != nullptr ? t.q + r * t.ld : nullptr;
      one.q_u8 = t.q_u8 != nullptr ? t.q_u8 + r * t.ld : nullptr;
      one.row_scales = t.row_scales + r;
      one.group_sums = t.group_sums + r * t.groups;  // int4's stride; int8 reads none
      one.y = t.y + r * t.ldy + p * 16;
      (int4 ? vnni.int4 : vnni.int8)(one);
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
  if (rows < t.rows) Rest(t, rows, false);
}

// W4A8, a group of 128 k at a time: the two panels' 16 lines of nibbles
// unpacked into int8 B tiles (low nibbles, the line's first 4 k, then the
// high ones; code - 8), the group's int32 sums on the tiles, then the VNNI
// kernel's f32 step s = fma(f32(sum), s_w(g), s) per row and column; at the
// end y [+]= s * s_a.
void Int4Tiles(const PanelTask& t) {
  if (t.rows < 16) return Rest(t, 0, true);
  const int rows = t.rows == kRows ? kRows : 16;
  alignas(64) int8_t b[kPanels][2][kTileBytes];  // [panel][tile of 64 k]
  alignas(64) int32_t sums[kRows * 32];
  alignas(64) float s[kRows * 32];
  const __m512i low4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  for (int64_t g = 0; g < t.groups; ++g) {
    const int64_t l0 = g * t.lines_per_group;
    const int64_t lines = t.lines - l0 < t.lines_per_group ? t.lines - l0 : t.lines_per_group;
    // 8 lines of 8 k make a tile; a last group's tile may pass K (within the
    // activations' ld, zero there): its lines past the panel's are zeros,
    // not read from the next panel.
    const int64_t tiles = (lines + 7) / 8;
    for (int p = 0; p < kPanels; ++p) {
      const uint8_t* src = t.lines_data + p * t.panel_bytes + l0 * 64;
      auto* out = reinterpret_cast<__m512i*>(b[p][0]);
      for (int64_t l = 0; l < tiles * 8; ++l) {
        __m512i lo = _mm512_setzero_si512(), hi = lo;
        if (l < lines) {
          const __m512i v = _mm512_load_si512(src + l * 64);
          lo = _mm512_sub_epi8(_mm512_and_si512(v, low4), eight);
          hi = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), eight);
        }
        _mm512_store_si512(out + 2 * l, lo);
        _mm512_store_si512(out + 2 * l + 1, hi);
      }
    }
    const int8_t* q = t.q + g * 128;
    const auto* w0 = reinterpret_cast<const uint8_t*>(b[0][0]);
    const auto* w1 = reinterpret_cast<const uint8_t*>(b[1][0]);
    if (rows == kRows) {
      Accumulate<false>(q, t.ld, w0, w1, tiles);
      _tile_stored(2, sums + 16 * 32, 128);
      _tile_stored(3, sums + 16 * 32 + 16, 128);
    } else {
      Accumulate<true>(q, t.ld, w0, w1, tiles);
    }
    _tile_stored(0, sums, 128);
    _tile_stored(1, sums + 16, 128);
    for (int p = 0; p < kPanels; ++p) {
      const __m512 sw = _mm512_loadu_ps(t.scales + g * t.scale_stride + p * 16);
      for (int r = 0; r < rows; ++r) {
        const __m512 f = _mm512_cvtepi32_ps(_mm512_load_si512(sums + r * 32 + p * 16));
        float* sr = s + r * 32 + p * 16;
        _mm512_store_ps(sr,
                        g == 0 ? _mm512_mul_ps(f, sw) : _mm512_fmadd_ps(f, sw, _mm512_load_ps(sr)));
      }
    }
  }
  for (int p = 0; p < kPanels; ++p) {
    const int columns = p + 1 < kPanels ? 16 : t.columns;
    const __mmask16 mask = static_cast<__mmask16>((1u << columns) - 1);
    float* y = t.y + p * 16;
    for (int r = 0; r < rows; ++r, y += t.ldy) {
      __m512 out =
          _mm512_mul_ps(_mm512_load_ps(s + r * 32 + p * 16), _mm512_set1_ps(t.row_scales[r]));
      if (t.accumulate) out = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), out);
      _mm512_mask_storeu_ps(y, mask, out);
    }
  }
  if (rows < t.rows) Rest(t, rows, true);
}

}  // namespace

const Kernels& AmxKernels() {
  static const Kernels kKernels = [] {
    Kernels k = Avx512Kernels();  // few rows and int4
    k.int8_wide = Int8Tiles;
    k.int4_wide = Int4Tiles;
    k.wide_panels = kPanels;
    k.wide_rows = kRows;
    k.enter = [] { ConfigureAmxTiles(); };
    k.leave = [] { _tile_release(); };
    k.int8_rows = Int8Rows::kBoth;  // tiles: signed; rows past the last tile: VNNI's
    return k;
  }();
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
