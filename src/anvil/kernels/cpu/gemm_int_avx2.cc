// AVX2 panel kernels of the integer GEMM (gemm_int.h): each half of a
// 16-column panel (8 columns, a ymm of int32 sums) for up to 4 rows, with
// vpmaddubsw (u8 x s8 -> pairs summed to s16) and vpmaddwd by ones (-> s32).
//   int8: |qa| x (qw with qa's sign): |a pair| <= 2 * 127 * 127 < 2^15, exact.
//   int4: u8 nibble (qw + 8) x s8 qa, a line's two nibbles' pairs added are
//         <= 4 * 15 * 127 < 2^15; the offset adds 8 * sum_k qa per group, removed once.
// CPUs with AVX-VNNI run gemm_int_avxvnni.cc instead (the same sums).
#include "anvil/kernels/cpu/gemm_int_avx2_panels.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

struct Dot {
  static __m256i Int4(__m256i acc, __m256i lo, __m256i hi, const int8_t* q) {
    using P = Avx2Panels<Dot>;
    const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, P::Broadcast4(q)),
                                           _mm256_maddubs_epi16(hi, P::Broadcast4(q + 4)));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
};
using Panels = Avx2Panels<Dot>;

template <int R>
void Int8Half(const PanelTask& t, int h) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
  for (int64_t l = 0; l < t.lines; ++l) {
    if (h == 0) Panels::PrefetchLine(t, l);  // (the second half finds the lines in L2)
    const __m256i w = Panels::Line(t, l, h);
    for (int r = 0; r < R; ++r) {
      const __m256i a = Panels::Broadcast4(t.q + r * t.ld + l * 4);
      const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(a), _mm256_sign_epi8(w, a));
      acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(pairs, ones));
    }
  }
  const __m256 sw = _mm256_loadu_ps(t.scales + 8 * h);
  for (int r = 0; r < R; ++r) {
    Panels::Store(t, r, h, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r]), sw));
  }
}

template <int R>
void Int8Panel(const PanelTask& t) {
  Int8Half<R>(t, 0);
  if (t.columns > 8) Int8Half<R>(t, 1);
}

void Int8(const PanelTask& t) {
  static constexpr void (*kTable[Panels::kRows])(const PanelTask&) = {Int8Panel<1>, Int8Panel<2>,
                                                                      Int8Panel<3>, Int8Panel<4>};
  kTable[t.rows - 1](t);
}

}  // namespace

const Kernels& Avx2Kernels() {
  static constexpr Kernels kKernels = {Int8, Panels::Int4, Panels::kRows};
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
