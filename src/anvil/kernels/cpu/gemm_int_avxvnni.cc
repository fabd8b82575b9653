// AVX-VNNI panel kernels of the integer GEMM (gemm_int.h), for the AVX2 tier
// on CPUs that have the VEX-encoded vpdpbusd (Zen 5, Intel since Alder Lake;
// not Zen 3): one 16-column panel (two ymm halves of int32 sums) for up to 4
// rows. vpdpbusd multiplies 4 k of a broadcast activation word with a
// weight line per instruction and adds the four products in int32, where the
// AVX2 kernels take five instructions (vpabsb, vpsignb, vpmaddubsw,
// vpmaddwd, vpaddd):
//   int8: u8 (qa + 128) x s8 qw; the offset adds 128 * sum_k qw, removed once.
//   int4: u8 nibble (qw + 8) x s8 qa; the offset adds 8 * sum_k qa per group.
// Every sum is the exact integer the AVX2 kernels form and the epilogue is
// theirs, so y is the same bit for bit (gemm_int_avxvnni_test.cc).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

constexpr int kRows = 4;

// acc += u8 a x s8 b, VEX-encoded ({vex}: braces escaped in asm), with acc tied in place (as the AVX-512
// unit's: GCC 12's intrinsic copies the accumulator before each one).
inline __m256i Dpbusd(__m256i acc, __m256i a, __m256i b) {
  asm("%{vex%} vpdpbusd %[b], %[a], %[acc]" : [acc] "+x"(acc) : [a] "x"(a), [b] "x"(b));
  return acc;
}

inline __m256i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

inline __m256i Line(const PanelTask& t, int64_t l, int h) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(t.lines_data + l * 64 + h * 32));
}

// y row r, columns [8 h, 8 h + 8) of the panel = [y +] s * s_a(r).
inline void Store(const PanelTask& t, int r, int h, __m256 s) {
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

// Both halves at once: each broadcast feeds two multiply-adds.
template <int R>
void Int8Panel(const PanelTask& t) {
  __m256i lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
  for (int64_t l = 0; l < t.lines; ++l) {
    const __m256i w0 = Line(t, l, 0), w1 = Line(t, l, 1);
    for (int r = 0; r < R; ++r) {
      const __m256i a = Broadcast4(t.q_u8 + r * t.ld + l * 4);
      lo[r] = Dpbusd(lo[r], a, w0);
      hi[r] = Dpbusd(hi[r], a, w1);
    }
  }
  for (int h = 0; h < 2; ++h) {
    const __m256i offset = _mm256_slli_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.column_sums + 8 * h)), 7);
    const __m256 sw = _mm256_loadu_ps(t.scales + 8 * h);
    for (int r = 0; r < R; ++r) {
      const __m256i sum = _mm256_sub_epi32(h == 0 ? lo[r] : hi[r], offset);
      Store(t, r, h, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), sw));
    }
  }
}

template <int R>
void Int4Half(const PanelTask& t, int h) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 s[R];
  for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < t.groups; ++g) {
    __m256i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
    const int64_t l0 = g * t.lines_per_group;
    const int64_t l1 = l0 + t.lines_per_group < t.lines ? l0 + t.lines_per_group : t.lines;
    for (int64_t l = l0; l < l1; ++l) {
      const __m256i v = Line(t, l, h);
      const __m256i lo = _mm256_and_si256(v, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      for (int r = 0; r < R; ++r) {
        const int8_t* q = t.q + r * t.ld + l * 8;
        acc[r] = Dpbusd(acc[r], lo, Broadcast4(q));
        acc[r] = Dpbusd(acc[r], hi, Broadcast4(q + 4));
      }
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
void Int4Panel(const PanelTask& t) {
  Int4Half<R>(t, 0);
  if (t.columns > 8) Int4Half<R>(t, 1);
}

void Int8(const PanelTask& t) {
  static constexpr void (*kTable[kRows])(const PanelTask&) = {Int8Panel<1>, Int8Panel<2>,
                                                              Int8Panel<3>, Int8Panel<4>};
  kTable[t.rows - 1](t);
}

void Int4(const PanelTask& t) {
  static constexpr void (*kTable[kRows])(const PanelTask&) = {Int4Panel<1>, Int4Panel<2>,
                                                              Int4Panel<3>, Int4Panel<4>};
  kTable[t.rows - 1](t);
}

}  // namespace

const Kernels& AvxVnniKernels() {
  static constexpr Kernels kKernels = {Int8, Int4, kRows};
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
