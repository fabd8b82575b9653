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
#include "anvil/kernels/cpu/gemm_int_avx2_panels.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

// acc += u8 a x s8 b, VEX-encoded ({vex}: braces escaped in asm), with acc
// tied in place (as the AVX-512 unit's: GCC 12's intrinsic copies the
// accumulator before each one).
inline __m256i Dpbusd(__m256i acc, __m256i a, __m256i b) {
  asm("%{vex%} vpdpbusd %[b], %[a], %[acc]" : [acc] "+x"(acc) : [a] "x"(a), [b] "x"(b));
  return acc;
}

struct Dot {
  static __m256i Int4(__m256i acc, __m256i lo, __m256i hi, const int8_t* q) {
    using P = Avx2Panels<Dot>;
    return Dpbusd(Dpbusd(acc, lo, P::Broadcast4(q)), hi, P::Broadcast4(q + 4));
  }
};
using Panels = Avx2Panels<Dot>;

// Both halves at once: each broadcast feeds two multiply-adds.
template <int R>
void Int8Panel(const PanelTask& t) {
  __m256i lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm256_setzero_si256();
  for (int64_t l = 0; l < t.lines; ++l) {
    Panels::PrefetchLine(t, l);
    const __m256i w0 = Panels::Line(t, l, 0), w1 = Panels::Line(t, l, 1);
    for (int r = 0; r < R; ++r) {
      const __m256i a = Panels::Broadcast4(t.q_u8 + r * t.ld + l * 4);
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
      Panels::Store(t, r, h, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), sw));
    }
  }
}

void Int8(const PanelTask& t) {
  static constexpr void (*kTable[Panels::kRows])(const PanelTask&) = {Int8Panel<1>, Int8Panel<2>,
                                                                      Int8Panel<3>, Int8Panel<4>};
  kTable[t.rows - 1](t);
}

}  // namespace

const Kernels& AvxVnniKernels() {
  static constexpr Kernels kKernels = {.int8 = Int8,
                                       .int4 = Panels::Int4,
                                       .max_rows = Panels::kRows,
                                       .int8_rows = Int8Rows::kUnsigned};
  return kKernels;
}

}  // namespace anvil::kernels::gemm_int_internal
