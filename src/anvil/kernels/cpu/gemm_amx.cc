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
// computed from that row of A alone. So on a CPU with AMX every bf16 GEMM
// (and FP8 decoded to bf16) of a context that uses it runs on the tiles, the
// one-row calls too (DecodeRegion streams B through the same instructions),
// and batch invariance holds among them.
#include <cstring>

#include "anvil/core/amx_tiles.h"
#include "anvil/core/intrinsics.h"
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
// Row blocks of 4 tiles (128 rows x 1024 steps x 4 B = 512 KiB of A at the
// largest K block, in a 2 MiB L2) and column blocks as the AVX-512 tier's.
constexpr int64_t kMc = 4 * kMr;
constexpr int64_t kNc = 1024;

constexpr int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
constexpr int64_t TileSteps(int64_t kc) {
  return ((kc + 1) / 2 + kTileSteps - 1) / kTileSteps * kTileSteps;
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

// The 32 x 32 tile's sums over `steps` k-pairs from zero, in tiles 0-3; or
// (kHalf) only its first 16 rows', in tiles 0-1: tiles 0-1 see the same
// instructions either way, so a row's sums do not depend on which ran.
template <bool kHalf = false>
void Accumulate(int64_t steps, const uint32_t* ap, const uint32_t* bp) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (!kHalf) {
    _tile_zero(2);
    _tile_zero(3);
  }
  const int64_t a_stride = steps * 4;
  const uint32_t* a1 = ap + 16 * steps;
  for (int64_t s = 0; s < steps; s += kTileSteps) {
    _tile_loadd(4, ap + s, a_stride);
    _tile_loadd(6, bp + s * kNr, kNr * 4);
    _tile_loadd(7, bp + s * kNr + 16, kNr * 4);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (!kHalf) {
      _tile_loadd(5, a1 + s, a_stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
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
  static constexpr int64_t kInPlaceAliasLdb = 0;
  static constexpr int64_t KBlock(bool) { return kAmxBf16.kc; }
  static constexpr int64_t Steps(bool, int64_t kc) { return TileSteps(kc); }

  static void PackA(const BF16* a, int64_t lda, bool t, int64_t rows, int64_t kc, uint32_t* ap) {
    amx::PackA(a, lda, t, rows, kc, ap);
  }
  static void PackB(const BF16* b, int64_t ldb, bool t, int64_t cols, int64_t kc, uint32_t* bp) {
    amx::PackB(b, ldb, t, cols, kc, bp);
  }
  static void Micro(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp, int64_t,
                    const uint32_t*, float* c, int64_t ldc, bool add) {
    amx::Micro(steps, ap, bp, c, ldc, add);
  }
  // Edge tiles: the whole tile on zero-padded panels into the driver's copy.
  // Up to 16 rows (decoding's few rows, a call's last rows): the first two
  // accumulator tiles only, then those rows into C; more take the whole tile.
  static bool MicroRows(bool, int64_t rows, int64_t steps, const uint32_t* ap, const uint32_t* bp,
                        int64_t, const uint32_t*, float* c, int64_t ldc, bool add) {
    if (rows > 16) return false;
    Accumulate<true>(steps, ap, bp);
    alignas(64) float tile[16 * kNr];
    _tile_stored(0, tile, kNr * 4);
    _tile_stored(1, tile + 16, kNr * 4);
    for (int64_t r = 0; r < rows; ++r) {
      float* row = c + r * ldc;
      __m512 t0 = _mm512_load_ps(tile + r * kNr), t1 = _mm512_load_ps(tile + r * kNr + 16);
      if (add) {
        t0 = _mm512_add_ps(_mm512_loadu_ps(row), t0);
        t1 = _mm512_add_ps(_mm512_loadu_ps(row + 16), t1);
      }
      _mm512_storeu_ps(row, t0);
      _mm512_storeu_ps(row + 16, t1);
    }
    return true;
  }
  static bool MicroScaled(bool, int64_t steps, const uint32_t* ap, const uint32_t* bp, int64_t,
                          const uint32_t*, float* c, int64_t ldc, const float* sa, const float* sb,
                          bool add) {
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
  static void WidenRow(const BF16* src, float* dst, int64_t n) { avx512::WidenRow(src, dst, n); }
  static void RoundRow(const float* src, BF16* dst, int64_t n) { avx512::RoundRow(src, dst, n); }
};

// Few rows with B stored [k, n] (decoding): B is never packed whole. Its
// rows are paired 16 k-pairs x 32 columns at a time into an L1 chunk (the
// words PackB would write), one chunk ahead of the two tdpbf16ps that read
// it, over the driver's K blocks with its A panels and C updates; A's panels
// for all of K (kStreamMaxK at most) live in scratch.
//
// B is walked a slice of 32 rows at a time across a column block of
// kDecodeCols, so each row is read in runs of 2 KiB; a strip's two
// accumulators are stored between slices and loaded again (exact f32; the
// tiles have the call's rows only). Each accumulator sees MicroRows'
// instructions (Accumulate<true>), so every element gets the packed path's
// bits. Walking all of K per 32-column strip instead read 64 bytes of each
// row in turn: 1 x 32768 x 4096 from DRAM ran at 8 GB/s.
constexpr int64_t kStreamMaxK = 8192;
constexpr int64_t kDecodeCols = 1024;
// One A tile's rows; A's panels, the strips' sums and a bf16 C's f32
// partials within the least scratch.
static_assert(kAmxBf16.decode_max_m <= 16);
static_assert((kStreamMaxK / kAmxBf16.kc * kMr * TileSteps(kAmxBf16.kc) + 16 * kDecodeCols * 2) *
                  4 <=
              static_cast<int64_t>(kMinScratchBytes));

// B rows [k, k + 32) (past kc: zeros) x columns [j0, j0 + 32) (mask: the
// valid ones) as 16 steps of k-pairs, kNr words a step: two rows' 32 values
// interleaved by two word permutes.
void PairChunk(const uint16_t* b, int64_t ldb, int64_t k, int64_t kc, __mmask32 mask,
               uint32_t* chunk) {
  alignas(64) static constexpr uint16_t kFirst[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                      37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                      11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  alignas(64) static constexpr uint16_t kSecond[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21,
                                                       53, 22, 54, 23, 55, 24, 56, 25, 57, 26, 58,
                                                       27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i first = _mm512_load_si512(kFirst), second = _mm512_load_si512(kSecond);
  for (int64_t s = 0; s < kTileSteps; ++s, k += 2) {
    const uint16_t* lo = b + k * ldb;
    const __m512i l = k < kc ? _mm512_maskz_loadu_epi16(mask, lo) : _mm512_setzero_si512();
    const __m512i h =
        k + 1 < kc ? _mm512_maskz_loadu_epi16(mask, lo + ldb) : _mm512_setzero_si512();
    _mm512_store_si512(chunk + s * kNr, _mm512_permutex2var_epi16(l, first, h));
    _mm512_store_si512(chunk + s * kNr + 16, _mm512_permutex2var_epi16(l, second, h));
  }
}

void DecodeRegion(const Problem& p, const Region& r, std::byte* scratch) {
  const int64_t rows = r.m1 - r.m0;
  const int64_t kKc = kAmxBf16.kc;
  const int64_t blocks = (p.k + kKc - 1) / kKc;
  ConfigureAmxTiles(static_cast<int>(rows));
  auto* ap = reinterpret_cast<uint32_t*>(scratch);  // block b's panel at b * kMr * TileSteps(kKc)
  const auto* a = static_cast<const BF16*>(p.a);
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t pc = b * kKc, kc = Min(kKc, p.k - pc);
    PackA(p.trans_a ? a + pc * p.lda + r.m0 : a + r.m0 * p.lda + pc, p.lda, p.trans_a, rows, kc,
          ap + b * kMr * TileSteps(kKc));
  }
  // Strip q's sums, rows x kNr, at sums + q * 16 * kNr; a bf16 C's partials
  // [rows, kDecodeCols].
  auto* sums = reinterpret_cast<float*>(ap + blocks * kMr * TileSteps(kKc));
  float* part = sums + 16 * kDecodeCols;
  const auto* bq = static_cast<const uint16_t*>(p.b);
  alignas(64) uint32_t chunks[2][kTileSteps * kNr];
  for (int64_t c0 = r.n0; c0 < r.n1; c0 += kDecodeCols) {
    const int64_t width = Min(kDecodeCols, r.n1 - c0);
    const int64_t strips = (width + kNr - 1) / kNr;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t pc = b * kKc, kc = Min(kKc, p.k - pc), steps = TileSteps(kc);
      const uint32_t* apanel = ap + b * kMr * TileSteps(kKc);
      const uint16_t* bb = bq + pc * p.ldb + c0;
      // Chunk i: slice i / strips, strip i % strips; paired one ahead, so
      // the tile unit reads a chunk the stores wrote an iteration earlier.
      auto pair = [&](int64_t i, uint32_t* chunk) {
        const int64_t cols = Min(kNr, width - (i % strips) * kNr);
        const __mmask32 mask = cols >= 32 ? ~__mmask32{0} : (__mmask32{1} << cols) - 1;
        PairChunk(bb + (i % strips) * kNr, p.ldb, 2 * kTileSteps * (i / strips), kc, mask, chunk);
      };
      const int64_t chunk_count = steps / kTileSteps * strips;
      pair(0, chunks[0]);
      for (int64_t i = 0; i < chunk_count; ++i) {
        if (i + 1 < chunk_count) pair(i + 1, chunks[(i + 1) % 2]);
        const int64_t s0 = i / strips * kTileSteps;
        float* strip = sums + (i % strips) * 16 * kNr;
        if (s0 == 0) {
          _tile_zero(0);
          _tile_zero(1);
        } else {
          _tile_loadd(0, strip, kNr * 4);
          _tile_loadd(1, strip + 16, kNr * 4);
        }
        _tile_loadd(4, apanel + s0, steps * 4);
        _tile_loadd(6, chunks[i % 2], kNr * 4);
        _tile_loadd(7, chunks[i % 2] + 16, kNr * 4);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_stored(0, strip, kNr * 4);
        _tile_stored(1, strip + 16, kNr * 4);
      }
      // C (=|+=) the block's sums; a bf16 C's partials stay f32 until the end.
      const bool add = b > 0 || p.accumulate;
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t q = 0; q < strips; ++q) {
          const float* t = sums + q * 16 * kNr + i * kNr;
          const int64_t j0 = c0 + q * kNr, ncols = Min(kNr, width - q * kNr);
          if (p.bf16_out) {
            float* w = part + i * kDecodeCols + q * kNr;
            const BF16* c = static_cast<const BF16*>(p.c) + (r.m0 + i) * p.ldc + j0;
            if (b == 0 && p.accumulate) Tier::WidenRow(c, w, ncols);
            for (int64_t j = 0; j < ncols; ++j) w[j] = add ? w[j] + t[j] : t[j];
          } else {
            float* c = static_cast<float*>(p.c) + (r.m0 + i) * p.ldc + j0;
            for (int64_t j = 0; j < ncols; ++j) c[j] = add ? c[j] + t[j] : t[j];
          }
        }
      }
    }
    if (p.bf16_out) {
      for (int64_t i = 0; i < rows; ++i) {
        Tier::RoundRow(part + i * kDecodeCols, static_cast<BF16*>(p.c) + (r.m0 + i) * p.ldc + c0,
                       width);
      }
    }
  }
}

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
  if (p.fp8 == nullptr && StreamsB(p, kAmxBf16) && p.k <= amx::kStreamMaxK) {
    amx::DecodeRegion(p, r, scratch);  // configures tiles of its rows
  } else if (p.fp8 != nullptr) {
    ConfigureAmxTiles();
    Driver<amx::Tier>::Run<Fp8Codes<true>>(p, r, scratch, scratch_bytes);
  } else {
    ConfigureAmxTiles();
    Driver<amx::Tier>::Run<BF16>(p, r, scratch, scratch_bytes);
  }
  _tile_release();
}

}  // namespace anvil::kernels::gemm_internal
