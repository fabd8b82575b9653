// What the AVX2 tier's two integer-GEMM units share (gemm_int_avx2.cc:
// vpmaddubsw; gemm_int_avxvnni.cc: AVX-VNNI's vpdpbusd): the activation
// broadcast, the epilogue store and the W4A8 panel, templated on the unit's
// `Dot` (its int4 multiply-add), so each unit's code keeps symbols of its own
// (they are compiled for different instruction sets). Include only from
// those units.
//   Dot::Int4(acc, lo, hi, q): acc + the int32 sums of (u8 nibbles lo x s8
//   q[0..3]) + (u8 nibbles hi x s8 q[4..7]) per 4-byte lane, exactly.
#pragma once

#include <cstdint>
#include <cstring>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {

template <class Dot>
struct Avx2Panels {
  static constexpr int kRows = 4;  // rows per task

  static __m256i Broadcast4(const void* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }

  // Line l + kPrefetchLines from DRAM, else line l (PanelTask::prefetch_bytes).
  static void PrefetchLine(const PanelTask& t, int64_t l) {
    // (an address computed as an integer: past the last panel it points nowhere)
    _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(t.lines_data) + l * 64 +
                                               t.prefetch_bytes),
                 _MM_HINT_T0);
  }

  // The panel's half h (8 columns of int32 lanes) of line l.
  static __m256i Line(const PanelTask& t, int64_t l, int h) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(t.lines_data + l * 64 + h * 32));
  }

  // y row r, columns [8 h, 8 h + 8) of the panel = [y +] s * s_a(r).
  static void Store(const PanelTask& t, int r, int h, __m256 s) {
    const int valid = t.columns - 8 * h;
    if (valid <= 0) return;
    float* y = t.y + r * t.ldy + 8 * h;
    const __m256 out = _mm256_mul_ps(s, _mm256_set1_ps(t.row_scales[r]));
    if (valid >= 8) {
      _mm256_storeu_ps(y, t.accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), out) : out);
      return;
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, out);
    for (int c = 0; c < valid; ++c) y[c] = t.accumulate ? y[c] + lanes[c] : lanes[c];
  }

  // W4A8: u8 nibble (qw + 8) x s8 qa per group of lines; the offset adds
  // 8 * sum_k qa per group, removed once; groups' sums scaled and added in order.
  template <int R>
  static void Int4Half(const PanelTask& t, int h) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 s[R];
    for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < t.groups; ++g) {
      __m256i acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
      const int64_t l0 = g * t.lines_per_group;
      const int64_t l1 = l0 + t.lines_per_group < t.lines ? l0 + t.lines_per_group : t.lines;
      for (int64_t l = l0; l < l1; ++l) {
        if (h == 0) PrefetchLine(t, l);  // (the second half finds the lines in L2)
        const __m256i v = Line(t, l, h);
        const __m256i lo = _mm256_and_si256(v, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        for (int r = 0; r < R; ++r) acc[r] = Dot::Int4(acc[r], lo, hi, t.q + r * t.ld + l * 8);
      }
      const __m256 sw = _mm256_loadu_ps(t.scales + g * t.scale_stride + 8 * h);
      for (int r = 0; r < R; ++r) {
        const __m256i offset = _mm256_set1_epi32(8 * t.group_sums[r * t.groups + g]);
        const __m256 f = _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r], offset));
        s[r] = g == 0 ? _mm256_mul_ps(f, sw) : _mm256_fmadd_ps(f, sw, s[r]);
      }
    }
    for (int r = 0; r < R; ++r) Store(t, r, h, s[r]);
  }

  template <int R>
  static void Int4Panel(const PanelTask& t) {
    Int4Half<R>(t, 0);
    if (t.columns > 8) Int4Half<R>(t, 1);
  }

  static void Int4(const PanelTask& t) {
    static constexpr void (*kTable[kRows])(const PanelTask&) = {Int4Panel<1>, Int4Panel<2>,
                                                                Int4Panel<3>, Int4Panel<4>};
    kTable[t.rows - 1](t);
  }
};

}  // namespace anvil::kernels::gemm_int_internal
