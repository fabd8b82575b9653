// AVX-512 VNNI panel kernels of the integer GEMM (gemm_int.h): one 16-column
// panel (a zmm of int32 sums) for up to 8 rows; vpdpbusd multiplies 4 k of
// a broadcast activation word with a 64-byte weight line per instruction.
//   int8: u8 (qa + 128) x s8 qw; the offset adds 128 * sum_k qw, removed once.
//   int4: u8 nibble (qw + 8) x s8 qa; the offset adds 8 * sum_k qa per group.
#include <cstdint>
#include <cstring>

#include "anvil/core/intrinsics.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

constexpr int kRows = 8;

// acc += u8 a x s8 b (vpdpbusd), with acc tied in place: GCC 12's intrinsic
// copies the accumulator before every instruction (and, with many of them,
// spills), which costs a third of the loop.
inline __m512i Dpbusd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
  return acc;
}

// Line l + kPrefetchLines from DRAM, else line l (PanelTask::prefetch_bytes).
inline void PrefetchLine(const PanelTask& t, int64_t l) {
  // (an address computed as an integer: past the last panel it points nowhere)
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(t.lines_data) + l * 64 +
                                             t.prefetch_bytes),
               _MM_HINT_T0);
}

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
    PrefetchLine(t, l);
    const __m512i w = _mm512_load_si512(t.lines_data + l * 64);
    for (int r = 0; r < R; ++r) {
      acc[r] = Dpbusd(acc[r], Broadcast4(t.q_u8 + r * t.ld + l * 4), w);
    }
  }
  const __m512i offset = _mm512_maskz_slli_epi32(0xFFFF, _mm512_loadu_si512(t.column_sums), 7);
  const __m512 sw = _mm512_loadu_ps(t.scales);
  for (int r = 0; r < R; ++r) {
    const __m512 f = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[r], offset));
    Store(t, r, _mm512_mul_ps(f, sw));
  }
}

// kWidePanels panels x R rows: per line, one load of each panel's weights
// and one broadcast per row feed kWidePanels multiply-adds.
constexpr int kWidePanels = 4;
constexpr int kWideRows = 6;

// The epilogue of one panel q of a wide task.
template <int R>
inline void StoreWide(const PanelTask& t, int q, const __m512i* acc) {
  PanelTask p = t;  // panel q's view for Store
  p.y = t.y + q * 16;
  p.columns = q + 1 < kWidePanels ? 16 : t.columns;
  const __m512i offset =
      _mm512_maskz_slli_epi32(0xFFFF, _mm512_loadu_si512(t.column_sums + q * 16), 7);
  const __m512 sw = _mm512_loadu_ps(t.scales + q * 16);
  for (int r = 0; r < R; ++r) {
    const __m512 f = _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(acc[r], offset));
    Store(p, r, _mm512_mul_ps(f, sw));
  }
}

// One accumulator array per panel (GCC keeps 1-D arrays in registers).
template <int R>
void Int8Wide(const PanelTask& t) {
  static_assert(kWidePanels == 4);
  __m512i acc0[R], acc1[R], acc2[R], acc3[R];
  for (int r = 0; r < R; ++r) {
    acc0[r] = acc1[r] = acc2[r] = acc3[r] = _mm512_setzero_si512();
  }
  const uint8_t* w0 = t.lines_data;
  const uint8_t* w1 = w0 + t.panel_bytes;
  const uint8_t* w2 = w1 + t.panel_bytes;
  const uint8_t* w3 = w2 + t.panel_bytes;
  for (int64_t l = 0; l < t.lines; ++l) {
    const __m512i b0 = _mm512_load_si512(w0 + l * 64);
    const __m512i b1 = _mm512_load_si512(w1 + l * 64);
    const __m512i b2 = _mm512_load_si512(w2 + l * 64);
    const __m512i b3 = _mm512_load_si512(w3 + l * 64);
    for (int r = 0; r < R; ++r) {
      const __m512i a = Broadcast4(t.q_u8 + r * t.ld + l * 4);
      acc0[r] = Dpbusd(acc0[r], a, b0);
      acc1[r] = Dpbusd(acc1[r], a, b1);
      acc2[r] = Dpbusd(acc2[r], a, b2);
      acc3[r] = Dpbusd(acc3[r], a, b3);
    }
  }
  StoreWide<R>(t, 0, acc0);
  StoreWide<R>(t, 1, acc1);
  StoreWide<R>(t, 2, acc2);
  StoreWide<R>(t, 3, acc3);
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
      PrefetchLine(t, l);
      const __m512i v = _mm512_load_si512(t.lines_data + l * 64);
      const __m512i lo = _mm512_and_si512(v, low4);
      const __m512i hi = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, v, 4), low4);
      for (int r = 0; r < R; ++r) {
        const int8_t* q = t.q + r * t.ld + l * 8;
        acc[r] = Dpbusd(acc[r], lo, Broadcast4(q));
        acc[r] = Dpbusd(acc[r], hi, Broadcast4(q + 4));
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

void Int8WideRows(const PanelTask& t) {
  static constexpr void (*kTable[kWideRows])(const PanelTask&) = {
      Int8Wide<1>, Int8Wide<2>, Int8Wide<3>, Int8Wide<4>, Int8Wide<5>, Int8Wide<6>};
  kTable[t.rows - 1](t);
}

}  // namespace

const Kernels& Avx512Kernels() {
  static constexpr Kernels kKernels = {.int8 = Int8,
                                       .int4 = Int4,
                                       .max_rows = kRows,
                                       .int8_wide = Int8WideRows,
                                       .wide_panels = kWidePanels,
                                       .wide_rows = kWideRows,
                                       .int8_rows = Int8Rows::kUnsigned};
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
