// AVX-512 VNNI panel kernels of the integer GEMM (gemm_int.h): one 16-column
// panel (a zmm of int32 sums) for up to 8 rows; vpdpbusd multiplies 4 k of
// a broadcast activation word with a 64-byte weight line per instruction.
//   int8: u8 (qa + 128) x s8 qw; the offset adds 128 * sum_k qw, removed once.
//   int4: u8 nibble (qw + 8) x s8 qa; the offset adds 8 * sum_k qa per group.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

constexpr int kRows = 8;

inline __m512i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// y row r = [y +] s * s_a(r) over the panel's valid columns.
inline void Store(const PanelTask& t, int r, __m512 s) {
  const __mmask16 mask = static_cast<__mmask16>((1u << t.columns) - 1);
  float* y = t.y + r * t.ldy;
  __m512 out = _mm512_mul_ps(s, _mm512_set1_ps(t.row_scales[r]));
  if (t.accumulate) out = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), out);
  _mm512_mask_storeu_ps(y, mask, out);
}

template <int R>
void Int8Panel(const PanelTask& t) {
  __m512i acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
  for (int64_t l = 0; l < t.lines; ++l) {
    const __m512i w = _mm512_load_si512(t.lines_data + l * 64);
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_dpbusd_epi32(acc[r], Broadcast4(t.q_u8 + r * t.ld + l * 4), w);
    }
  }
  const __m512i offset = _mm512_maskz_slli_epi32(0xFFFF, _mm512_loadu_si512(t.column_sums), 7);
  const __m512 sw = _mm512_loadu_ps(t.scales);
  for (int r = 0; r < R; ++r) {
    const __m512 f = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[r], offset));
    Store(t, r, _mm512_mul_ps(f, sw));
  }
}

template <int R>
void Int4Panel(const PanelTask& t) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512 s[R];
  for (int r = 0; r < R; ++r) s[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < t.groups; ++g) {
    __m512i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    const int64_t l0 = g * t.lines_per_group;
    const int64_t l1 = l0 + t.lines_per_group < t.lines ? l0 + t.lines_per_group : t.lines;
    for (int64_t l = l0; l < l1; ++l) {
      const __m512i v = _mm512_load_si512(t.lines_data + l * 64);
      const __m512i lo = _mm512_and_si512(v, low4);
      const __m512i hi = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, v, 4), low4);
      for (int r = 0; r < R; ++r) {
        const int8_t* q = t.q + r * t.ld + l * 8;
        acc[r] = _mm512_dpbusd_epi32(acc[r], lo, Broadcast4(q));
        acc[r] = _mm512_dpbusd_epi32(acc[r], hi, Broadcast4(q + 4));
      }
    }
    const __m512 sw = _mm512_loadu_ps(t.scales + g * t.scale_stride);
    for (int r = 0; r < R; ++r) {
      const __m512i offset = _mm512_set1_epi32(8 * t.group_sums[r * t.groups + g]);
      const __m512 f = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[r], offset));
      s[r] = g == 0 ? _mm512_mul_ps(f, sw) : _mm512_fmadd_ps(f, sw, s[r]);
    }
  }
  for (int r = 0; r < R; ++r) Store(t, r, s[r]);
}

void Int8(const PanelTask& t) {
  static constexpr void (*kTable[kRows])(const PanelTask&) = {
      Int8Panel<1>, Int8Panel<2>, Int8Panel<3>, Int8Panel<4>,
      Int8Panel<5>, Int8Panel<6>, Int8Panel<7>, Int8Panel<8>};
  kTable[t.rows - 1](t);
}

void Int4(const PanelTask& t) {
  static constexpr void (*kTable[kRows])(const PanelTask&) = {
      Int4Panel<1>, Int4Panel<2>, Int4Panel<3>, Int4Panel<4>,
      Int4Panel<5>, Int4Panel<6>, Int4Panel<7>, Int4Panel<8>};
  kTable[t.rows - 1](t);
}

}  // namespace

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = {Int8, Int4, kRows};
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
