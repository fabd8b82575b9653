// AMX bf16 GEMM (AMX-TILE + AMX-BF16, with AVX-512 for packing and
// epilogues): the packed driver (gemm_driver.h) around a 32 x 32 tile of C
// held in four AMX accumulator tiles. Each tdpbf16ps takes 16 rows x 16
// k-pairs of A and 16 k-pairs x 16 columns of B: 16 x 16 x 32 multiply-adds
// in one instruction, where vdpbf16ps does 16 x 2.
//
// Packed layouts, in 32-bit words holding bf16 k-pairs (even k low):
//   A block: panels of kMr rows, row-major: word (r, s) of panel q at
//            q * kMr * steps + r * steps + s (a tile row is 16 words of one row);
//   B block: as the AVX-512 tier packs bf16 (gemm_avx512.h): word (s, j) of
//            panel q at q * kNr * steps + s * kNr + j (a tile is 16 steps of
//            16 columns, rows kNr words apart).
// steps = ceil(kc / 2) rounded up to whole tiles (16); the words past K and
// the rows and columns past the matrix are zero, so every tile multiplies
// whole tiles and the padding adds exact zeros.
//
// The bits are not vdpbf16ps's: a tdpbf16ps sums its 32 products and the
// accumulator with its own internal rounding (on the Xeon it was built on,
// about 90% of sums agree with "accumulator + the products' exact sum,
// rounded once"). They are the same for a row of C whatever M, the row's
// place in a tile, the thread count or the other rows: each row of a tile is
// computed from that row of A alone. So on a CPU with AMX every bf16 GEMM of
// a context that uses it runs here, the one-row calls too (no streaming
// path), and batch invariance holds among them.
// GCC 12 warns inside its own AVX-512 intrinsics (PR 105593); not our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "anvil/kernels/cpu/gemm_avx512.h"
#include "anvil/kernels/cpu/gemm_avx512_pack_internal.h"
#include "anvil/kernels/cpu/gemm_driver.h"

namespace anvil::kernels::gemm_internal {
namespace amx {
namespace {

constexpr int64_t kMr = kAmxBf16.mr;
constexpr int64_t kNr = kAmxBf16.nr;
constexpr int64_t kTileSteps = kAmxBf16.step_align;  // k-pairs in a tile row
static_assert(kMr == 32 && kNr == 32 && kTileSteps == 16, "the kernel holds 2 x 2 tiles");
// Row blocks of 4 tiles (128 rows x 2048 steps x 4 B = 1 MiB of A at the
// largest K block, in a 2 MiB L2) and column blocks as the AVX-512 tier's.
constexpr int64_t kMc = 4 * kMr;
constexpr int64_t kNc = 1024;

constexpr int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
constexpr int64_t TileSteps(int64_t kc) {
  return ((kc + 1) / 2 + kTileSteps - 1) / kTileSteps * kTileSteps;
}

// ldtilecfg's 64-byte operand: every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};

void ConfigureTiles() {
  TileConfig cfg{};
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

__mmask16 Mask16(int64_t n) { return n >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << n) - 1u); }

// A rows [0, rows) x k [0, kc), op(A) at `a` (trans: A stored [k, m]).
void PackA(const BF16* a, int64_t lda, bool trans, int64_t rows, int64_t kc, uint32_t* ap) {
  const int64_t steps = TileSteps(kc);
  const int64_t panels = (rows + kMr - 1) / kMr;
  if (!trans) {
    // A row's pairs are its words in memory: a copy, zero past kc.
    for (int64_t r = 0; r < panels * kMr; ++r) {
      auto* out = reinterpret_cast<uint16_t*>(ap + r * steps);
      const int64_t n = r < rows ? kc : 0;
      if (n > 0) std::memcpy(out, a + r * lda, static_cast<size_t>(n) * 2);
      std::memset(out + n, 0, static_cast<size_t>(2 * steps - n) * 2);
    }
    return;
  }
  // Stored [k, m]: 16 steps of 16 rows paired from two k rows (one vector
  // per step, rows across the lanes), then transposed to 16 rows of 16 steps.
  const auto* src = reinterpret_cast<const uint16_t*>(a);
  for (int64_t r0 = 0; r0 < panels * kMr; r0 += 16) {
    const __mmask16 live = r0 < rows ? Mask16(rows - r0) : 0;
    for (int64_t s0 = 0; s0 < steps; s0 += 16) {
      __m512 v[16];
      for (int s = 0; s < 16; ++s) {
        const int64_t k = 2 * (s0 + s);
        const __m256i lo =
            k < kc ? _mm256_maskz_loadu_epi16(live, src + k * lda + r0) : _mm256_setzero_si256();
        const __m256i hi = k + 1 < kc ? _mm256_maskz_loadu_epi16(live, src + (k + 1) * lda + r0)
                                      : _mm256_setzero_si256();
        v[s] = _mm512_castsi512_ps(_mm512_or_si512(
            _mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16)));
      }
      avx512::Transpose16x16(v);
      for (int r = 0; r < 16; ++r) _mm512_storeu_ps(ap + (r0 + r) * steps + s0, v[r]);
    }
  }
}

// B k [0, kc) x columns [0, cols): the AVX-512 tier's panels, steps padded.
void PackB(const BF16* b, int64_t ldb, bool trans, int64_t cols, int64_t kc, uint32_t* bp) {
  const int64_t steps = TileSteps(kc), packed = (kc + 1) / 2;
  for (int64_t c0 = 0; c0 < cols; c0 += kNr) {
    uint32_t* panel = bp + c0 * steps;
    avx512::PackBBf16(trans ? b + c0 * ldb : b + c0, ldb, trans, Min(kNr, cols - c0), kc, panel);
    std::memset(panel + packed * kNr, 0, static_cast<size_t>((steps - packed) * kNr) * 4);
  }
}

// The 32 x 32 tile's sums over `steps` k-pairs from zero, in tiles 0-3.
void Accumulate(int64_t steps, const uint32_t* ap, const uint32_t* bp) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t a_stride = steps * 4;
  const uint32_t* a1 = ap + 16 * steps;
  for (int64_t s = 0; s < steps; s += kTileSteps) {
    _tile_loadd(4, ap + s, a_stride);
    _tile_loadd(6, bp + s * kNr, kNr * 4);
    _tile_loadd(7, bp + s * kNr + 16, kNr * 4);
    _tile_loadd(5, a1 + s, a_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
}

// Tiles 0-3 into the 32 x 32 f32 tile at c (rows ldc floats apart).
void StoreTiles(float* c, int64_t ldc) {
  _tile_stored(0, c, ldc * 4);
  _tile_stored(1, c + 16, ldc * 4);
  _tile_stored(2, c + 16 * ldc, ldc * 4);
  _tile_stored(3, c + 16 * ldc + 16, ldc * 4);
}

// C (=|+=) the tile's sums over `steps` k-pairs.
void Micro(int64_t steps, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
           bool add) {
  Accumulate(steps, ap, bp);
  if (!add) return StoreTiles(c, ldc);
  alignas(64) float tile[kMr * kNr];
  StoreTiles(tile, kNr);
  for (int64_t r = 0; r < kMr; ++r) {
    float* row = c + r * ldc;
    const float* t = tile + r * kNr;
    _mm512_storeu_ps(row, _mm512_add_ps(_mm512_loadu_ps(row), _mm512_load_ps(t)));
    _mm512_storeu_ps(row + 16, _mm512_add_ps(_mm512_loadu_ps(row + 16), _mm512_load_ps(t + 16)));
  }
}

// GemmFp8's block scaling of the tile's sums P into C, as the driver's
// BlockUpdate computes it: C = P * (sa * sb), or fma(P, sa * sb, C).
void MicroScaled(int64_t steps, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
                 const float* sa, const float* sb, bool add) {
  Accumulate(steps, ap, bp);
  alignas(64) float tile[kMr * kNr];
  StoreTiles(tile, kNr);
  const __m512 sb0 = _mm512_loadu_ps(sb), sb1 = _mm512_loadu_ps(sb + 16);
  for (int64_t r = 0; r < kMr; ++r) {
    float* row = c + r * ldc;
    const __m512 sr = _mm512_set1_ps(sa[r]);
    const __m512 f0 = _mm512_mul_ps(sr, sb0), f1 = _mm512_mul_ps(sr, sb1);
    const __m512 p0 = _mm512_load_ps(tile + r * kNr), p1 = _mm512_load_ps(tile + r * kNr + 16);
    if (add) {
      _mm512_storeu_ps(row, _mm512_fmadd_ps(p0, f0, _mm512_loadu_ps(row)));
      _mm512_storeu_ps(row + 16, _mm512_fmadd_ps(p1, f1, _mm512_loadu_ps(row + 16)));
    } else {
      _mm512_storeu_ps(row, _mm512_mul_ps(p0, f0));
      _mm512_storeu_ps(row + 16, _mm512_mul_ps(p1, f1));
    }
  }
}

// The AMX tier for Driver (gemm_driver.h): bf16 inputs, and FP8 operands
// decoded to bf16 (gemm_fp8.h's words, in this tier's panels).
struct Tier {
  static constexpr bool kFp8Pairs = true;
  static constexpr bool kOwnFp8Packing = true;
  static constexpr int64_t kMr = amx::kMr;
  static constexpr int64_t kNr = amx::kNr;
  static constexpr int64_t kMc = amx::kMc;
  static constexpr int64_t kNc = amx::kNc;
  static constexpr int64_t kInPlaceMaxLdb = 0;  // an f32 B never comes here
  static constexpr int64_t KBlock(bool) { return kAmxBf16.kc; }
  static constexpr int64_t Steps(bool, int64_t kc) { return TileSteps(kc); }

  static void PackA(const BF16* a, int64_t lda, bool t, int64_t rows, int64_t kc, uint32_t* ap) {
    amx::PackA(a, lda, t, rows, kc, ap);
  }
  static void PackB(const BF16* b, int64_t ldb, bool t, int64_t cols, int64_t kc, uint32_t* bp) {
    amx::PackB(b, ldb, t, cols, kc, bp);
  }
  static void Micro(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp, int64_t, float* c,
                    int64_t ldc, bool add) {
    amx::Micro(steps, ap, bp, c, ldc, add);
  }
  // Edge tiles: the whole tile on zero-padded panels into the driver's copy.
  static bool MicroRows(bool, int64_t, int64_t, const uint32_t*, const uint32_t*, int64_t, float*,
                        int64_t, bool) {
    return false;
  }
  static bool MicroScaled(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp, int64_t,
                          float* c, int64_t ldc, const float* sa, const float* sb, bool add) {
    amx::MicroScaled(steps, ap, bp, c, ldc, sa, sb, add);
    return true;
  }
  static bool PackFp8Vector(const Fp8Operand& o, const float* values, const uint16_t* bf16,
                            int64_t ld, bool trans, int64_t r0, int64_t rows, int64_t p0,
                            int64_t kc, int64_t k_total, int k_panel, bool pairs, uint32_t* out) {
    return avx512::PackFp8Vector(o, values, bf16, ld, trans, r0, rows, p0, kc, k_total, k_panel,
                                 pairs, out);
  }
  // FP8 B: Fp8Pack's bf16 panels (the AVX-512 tier's layout), steps padded.
  static void PackFp8B(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                       bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc,
                       int64_t k_total, uint32_t* bp) {
    const int64_t steps = TileSteps(kc), packed = (kc + 1) / 2;
    for (int64_t c0 = 0; c0 < rows; c0 += kNr) {
      uint32_t* panel = bp + c0 * steps;
      Fp8Pack<Tier>::Pack<kNr, true>(o, values, bf16, ld, trans, r0 + c0, Min(kNr, rows - c0), p0,
                                     kc, k_total, panel);
      std::memset(panel + packed * kNr, 0, static_cast<size_t>((steps - packed) * kNr) * 4);
    }
  }
  // FP8 A (stored [m, k]): Fp8Pack's panels a tile of k at a time (16 steps
  // x 32 rows on the stack), transposed into this tier's row-major panels.
  static void PackFp8A(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                       bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc,
                       int64_t k_total, uint32_t* ap) {
    const int64_t steps = TileSteps(kc);
    for (int64_t q = 0; q < rows; q += kMr) {
      uint32_t* panel = ap + q * steps;
      for (int64_t s0 = 0; s0 < steps; s0 += kTileSteps) {
        alignas(64) uint32_t chunk[kTileSteps * kMr];  // word (s, r) at s * kMr + r
        const int64_t k0 = 2 * s0, kn = Min(2 * kTileSteps, kc - k0);
        if (kn < 2 * kTileSteps) std::memset(chunk, 0, sizeof(chunk));
        Fp8Pack<Tier>::Pack<kMr, true>(o, values, bf16, ld, trans, r0 + q, Min(kMr, rows - q),
                                       p0 + k0, kn, k_total, chunk);
        for (int64_t h = 0; h < kMr; h += 16) {
          __m512 v[16];
          for (int s = 0; s < 16; ++s) v[s] = _mm512_load_ps(chunk + s * kMr + h);
          avx512::Transpose16x16(v);  // v[r]: row h + r, steps s0 .. s0 + 15
          for (int r = 0; r < 16; ++r) _mm512_storeu_ps(panel + (h + r) * steps + s0, v[r]);
        }
      }
    }
  }
  static void WidenRow(const BF16* src, float* dst, int64_t n) {
    for (int64_t j = 0; j < n; j += 16) {
      const __m256i h = _mm256_maskz_loadu_epi16(Mask16(n - j), src + j);
      _mm512_storeu_ps(dst + j,
                       _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
  }
  static void RoundRow(const float* src, BF16* dst, int64_t n) {
    for (int64_t j = 0; j < n; j += 16) {
      _mm256_mask_storeu_epi16(dst + j, Mask16(n - j),
                               _mm512_cvtepi32_epi16(avx512::Bf16Bits(_mm512_loadu_ps(src + j))));
    }
  }
};

}  // namespace
}  // namespace amx

void PackWholeBAmx(const Problem& p, int64_t n0, int64_t n1, uint32_t* out) {
  if (p.fp8 != nullptr) {
    Driver<amx::Tier>::PackWhole<Fp8Codes<true>>(p, n0, n1, out);
  } else {
    Driver<amx::Tier>::PackWhole<BF16>(p, n0, n1, out);
  }
}

void GemmRegionAmx(const Problem& p, const Region& r, std::byte* scratch, size_t scratch_bytes) {
  amx::ConfigureTiles();
  if (p.fp8 != nullptr) {
    Driver<amx::Tier>::Run<Fp8Codes<true>>(p, r, scratch, scratch_bytes);
  } else {
    Driver<amx::Tier>::Run<BF16>(p, r, scratch, scratch_bytes);
  }
  _tile_release();
}

}  // namespace anvil::kernels::gemm_internal
