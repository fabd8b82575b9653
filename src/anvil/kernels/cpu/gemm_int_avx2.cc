// AVX2 panel kernels of the integer GEMM (gemm_int.h): each half of a
// 16-column panel (8 columns, a ymm of int32 sums) for up to 4 rows, with
// vpmaddubsw (u8 x s8 -> pairs summed to s16) and vpmaddwd by ones (-> s32).
//   int8: |qa| x (qw with qa's sign): |a pair| <= 2 * 127 * 127 < 2^15, exact.
//   int4: u8 nibble (qw + 8) x s8 qa, a line's two nibbles' pairs added are
//         <= 4 * 15 * 127 < 2^15; the offset adds 8 * sum_k qa per group, removed once.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

constexpr int kRows = 4;

inline __m256i Broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// y row r, columns [8 h, 8 h + 8) of the panel = [y +] s * s_a(r).
inline void Store(const PanelTask& t, int r, int h, __m256 s) {
  const int valid = t.columns - 8 * h;
  if (valid <= 0) return;
  float* y = t.y + r * t.ldy + 8 * h;
  const __m256 out = _mm256_mul_ps(s, _mm256_set1_ps(t.row_scales[r]));
  alignas(32) float lanes[8];
  if (valid >= 8) {
    _mm256_storeu_ps(y, t.accumulate ? _mm256_add_ps(_mm256_loadu_ps(y), out) : out);
    return;
  }
  _mm256_store_ps(lanes, out);
  for (int c = 0; c < valid; ++c) y[c] = t.accumulate ? y[c] + lanes[c] : lanes[c];
}

template <int R>
void Int8Half(const PanelTask& t, int h) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
  for (int64_t l = 0; l < t.lines; ++l) {
    const __m256i w = _mm256_load_si256(
        reinterpret_cast<const __m256i*>(t.lines_data + l * 64 + h * 32));
    for (int r = 0; r < R; ++r) {
      const __m256i a = Broadcast4(t.q + r * t.ld + l * 4);
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(w, a));
      acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(pairs, ones));
    }
  }
  const __m256 sw = _mm256_loadu_ps(t.scales + 8 * h);
  for (int r = 0; r < R; ++r) Store(t, r, h, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r]), sw));
}

template <int R>
void Int4Half(const PanelTask& t, int h) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 s[R];
  for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < t.groups; ++g) {
    __m256i acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
    const int64_t l0 = g * t.lines_per_group;
    const int64_t l1 = l0 + t.lines_per_group < t.lines ? l0 + t.lines_per_group : t.lines;
    for (int64_t l = l0; l < l1; ++l) {
      const __m256i v = _mm256_load_si256(
          reinterpret_cast<const __m256i*>(t.lines_data + l * 64 + h * 32));
      const __m256i lo = _mm256_and_si256(v, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      for (int r = 0; r < R; ++r) {
        const int8_t* q = t.q + r * t.ld + l * 8;
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, Broadcast4(q)),
                                               _mm256_maddubs_epi16(hi, Broadcast4(q + 4)));
        acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(pairs, ones));
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
void Int8Panel(const PanelTask& t) {
  Int8Half<R>(t, 0);
  if (t.columns > 8) Int8Half<R>(t, 1);
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

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = {Int8, Int4, kRows};
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
