// The packed GEMM loop nest (Goto/BLIS) shared by the SIMD tiers, templated on
// a tier `K` that supplies blocking, packing, the micro-kernel and the bf16
// epilogues. Everything here is a template on K (a type of the ISA unit), so
// code built for different ISAs never shares a symbol.
//
// Order of work for one thread's region, and why it is batch-invariant:
//   for jc (nc columns):  for mb (row chunk; all rows unless C is bf16):
//     for pc (kc of K, increasing):  pack B[pc.., jc..] (an f32 B = [k, n]
//                         for few rows is read in place instead: kInPlaceRows)
//       for ic (mc rows):  pack A[ic.., pc..]
//         for jr, ir: micro-kernel: tile = Σ over this K block from zero,
//                     then C partial = tile (first block) or partial + tile.
// Each C element sees the same K blocks in the same order whatever the
// region, row chunk or tile it falls in; edge tiles run the full kernel on
// zero-padded panels into a scratch tile. GemmFp8 with block scaling and an
// f32 C instead runs (RunScaled) for jc: pack B over all of K;
// for ic: pack A over all of K; for jr, ir: for each K block in order, the block's tile from zero
// scaled into C: per element the same blocks, order and arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "anvil/core/bf16.h"
#include "anvil/kernels/cpu/gemm_fp8.h"
#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal {

// K must provide:
//   kMr, kNr, kMc, kNc (int64_t), kKc(bf16) -> K block in elements,
//   kInPlaceMaxLdb: the widest f32 B rows (in floats) read in place,
//   kInPlaceAliasLdb: row strides (in floats) that are multiples of it are
//     packed instead (0: none),
//   Steps(bf16, kc) -> packed steps of a kc block,
//   PackA<T>(a_at, lda, trans, rows, kc, uint32_t*), PackB<T>(...),
//   Micro(bf16, steps, ap, bp, b_step, b_next, float* c, ldc, bool add): B's
//     step s at bp + s * b_step words (kNr in a packed panel); b_next, null
//     or the next panel (laid out as bp's) to bring into L2 meanwhile,
//   MicroRows(bf16, rows, ... as Micro): the first rows (< kMr) of a tile
//     straight into C, or false where the tier runs edge tiles on a copy,
//   MicroScaled(bf16, ... as Micro, sa, sb, add): a whole tile through
//     BlockUpdate's arithmetic in registers, or false (then tile + BlockUpdate),
//   WidenRow(const BF16*, float*, n), RoundRow(const float*, BF16*, n),
//   kFp8Pairs: FP8 operands pack as bf16 k-pairs (else f32 words),
//   PackFp8Vector(...): gemm_fp8.h's packing in vector code, or false where
//     the tier has none for the case,
//   optionally kOwnFp8Packing = true with PackFp8A / PackFp8B (Fp8Pack::Pack's
//     arguments, bf16 k-pairs): a tier whose panels are not Fp8Pack's layout
//     (AMX) packs FP8 operands itself; its A panels are then row-major (a
//     tile row is one row's steps), so RunScaled packs A a K block at a time,
//     each block's panel where the k-major layout would put it,
// T = Fp8Codes<bf16?> runs GemmFp8: operands decoded while packing (gemm_fp8.h),
// K blocks of p.fp8->kblock, and with block scaling each block's tile goes
// into C through BlockUpdate's arithmetic (K::MicroScaled for a whole tile,
// else the tile in scratch and BlockUpdate) instead of straight in.
// Up to this many rows in a region, an f32 B stored [k, n] is read in place
// (each k step's kNr columns are contiguous there, as in a packed panel; only
// a partial last panel is packed) while its rows are at most the tier's
// kInPlaceMaxLdb floats apart: packing B costs more than it saves when few
// rows reuse it.
inline constexpr int64_t kInPlaceRows = 64;

template <class K>
struct Driver {
  static int64_t Min(int64_t a, int64_t b) { return a < b ? a : b; }
  static int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

  struct Scratch {
    uint32_t* bp;  // packed B block: steps x nc_max
    uint32_t* ap;  // packed A block: kMc x steps
    float* tile;   // one kMr x kNr edge tile
    float* panel;  // bf16 C only: f32 partials, panel_rows x nc_max
    int64_t nc_max;
    int64_t panel_rows;
  };

  static constexpr bool OwnFp8Packing() {
    if constexpr (requires { K::kOwnFp8Packing; }) {
      return K::kOwnFp8Packing;
    } else {
      return false;
    }
  }

  // FP8 packs bf16 k-pairs when decoded to bf16 on a tier with a bf16 kernel.
  template <typename T>
  static constexpr bool Pairs() {
    return std::is_same_v<T, Fp8Codes<true>> && K::kFp8Pairs;
  }
  // Whether T runs the bf16 kernel (k-pair steps), and its K block.
  template <typename T>
  static constexpr bool Bf16Kernel() {
    return std::is_same_v<T, BF16> || Pairs<T>();
  }
  template <typename T>
  static int64_t KBlock(const Problem& p) {
    if constexpr (kIsFp8<T>) return p.fp8->kblock;
    return K::KBlock(Bf16Kernel<T>());
  }

  // Packs B's K [pc, pc + kc) x columns [jc, jc + nc), A's rows [ic, ic + mc) x K [pc, pc + kc).
  template <typename T>
  static void PackB(const Problem& p, int64_t pc, int64_t jc, int64_t kc, int64_t nc,
                    uint32_t* bp) {
    if constexpr (kIsFp8<T> && OwnFp8Packing()) {
      const Fp8Problem& f = *p.fp8;
      K::PackFp8B(f.b, f.value_b, f.bf16_b, p.ldb, !p.trans_b, jc, nc, pc, kc, p.k, bp);
    } else if constexpr (kIsFp8<T>) {
      const Fp8Problem& f = *p.fp8;
      Fp8Pack<K>::template Pack<K::kNr, Pairs<T>()>(f.b, f.value_b, f.bf16_b, p.ldb, !p.trans_b, jc,
                                                    nc, pc, kc, p.k, bp);
    } else {
      const T* b = static_cast<const T*>(p.b);
      K::PackB(p.trans_b ? b + jc * p.ldb + pc : b + pc * p.ldb + jc, p.ldb, p.trans_b, nc, kc, bp);
    }
  }
  template <typename T>
  static void PackA(const Problem& p, int64_t pc, int64_t ic, int64_t kc, int64_t mc,
                    uint32_t* ap) {
    if constexpr (kIsFp8<T> && OwnFp8Packing()) {
      const Fp8Problem& f = *p.fp8;
      K::PackFp8A(f.a, f.value_a, f.bf16_a, p.lda, false, ic, mc, pc, kc, p.k, ap);
    } else if constexpr (kIsFp8<T>) {
      const Fp8Problem& f = *p.fp8;
      Fp8Pack<K>::template Pack<K::kMr, Pairs<T>()>(f.a, f.value_a, f.bf16_a, p.lda, false, ic, mc,
                                                    pc, kc, p.k, ap);
    } else {
      const T* a = static_cast<const T*>(p.a);
      K::PackA(p.trans_a ? a + pc * p.lda + ic : a + ic * p.lda + pc, p.lda, p.trans_a, mc, kc, ap);
    }
  }

  // Columns [n0, n1) of B packed whole (gemm_internal.h's PackedBWords layout).
  template <typename T>
  static void PackWhole(const Problem& p, int64_t n0, int64_t n1, uint32_t* out) {
    constexpr bool kBf16 = Bf16Kernel<T>();
    const int64_t kKc = KBlock<T>(p);
    const int64_t npad = RoundUp(p.n, K::kNr);
    for (int64_t pc = 0; pc < p.k; pc += kKc) {
      const int64_t kc = Min(kKc, p.k - pc);
      uint32_t* block = out + (pc / kKc) * K::Steps(kBf16, kKc) * npad;
      for (int64_t jc = n0; jc < n1; jc += K::kNc) {
        PackB<T>(p, pc, jc, kc, Min(K::kNc, n1 - jc), block + jc * K::Steps(kBf16, kc));
      }
    }
  }

  // PackWhole for p's element type (f32, bf16, or FP8 codes decoded as p.fp8 says).
  static void PackWholeB(const Problem& p, int64_t n0, int64_t n1, uint32_t* out) {
    if (p.fp8 == nullptr && p.bf16_in) {
      PackWhole<BF16>(p, n0, n1, out);
    } else if (p.fp8 == nullptr) {
      PackWhole<float>(p, n0, n1, out);
    } else if (p.fp8->decode_bf16) {
      PackWhole<Fp8Codes<true>>(p, n0, n1, out);
    } else {
      PackWhole<Fp8Codes<false>>(p, n0, n1, out);
    }
  }

  // Shrinks nc below K::kNc only when scratch is small.
  static Scratch Carve(std::byte* scratch, size_t bytes, int64_t steps) {
    Scratch s{};
    s.nc_max = K::kNc;
    const auto need = [&](int64_t nc) {
      return static_cast<size_t>((steps * nc + K::kMc * steps + K::kMr * K::kNr + K::kMr * nc) * 4);
    };
    while (need(s.nc_max) > bytes && s.nc_max > K::kNr) s.nc_max /= 2;
    s.bp = reinterpret_cast<uint32_t*>(scratch);
    s.ap = s.bp + steps * s.nc_max;
    s.tile = reinterpret_cast<float*>(s.ap + K::kMc * steps);
    s.panel = s.tile + K::kMr * K::kNr;
    const size_t used = static_cast<size_t>(reinterpret_cast<std::byte*>(s.panel) - scratch);
    s.panel_rows = static_cast<int64_t>((bytes - used) / (s.nc_max * 4)) / K::kMr * K::kMr;
    return s;
  }

  // C tile (=|+=) P * (sa[i] * sb[j]): one K block's tile of GemmFp8 with
  // block scaling; sa, sb the block's factors of the tile's rows and columns.
  static void BlockUpdate(const float* tile, float* ct, int64_t ldc, int64_t rows, int64_t cols,
                          const float* sa, const float* sb, bool add) {
    for (int64_t i = 0; i < rows; ++i) {
      const float* t = tile + i * K::kNr;
      float* c = ct + i * ldc;
      if (add) {
        for (int64_t j = 0; j < cols; ++j) c[j] = __builtin_fmaf(t[j], sa[i] * sb[j], c[j]);
      } else {
        for (int64_t j = 0; j < cols; ++j) c[j] = t[j] * (sa[i] * sb[j]);
      }
    }
  }
  // factors[0, count) of stored rows [row0, row0 + count) in K block kb
  // (Fp8Pack::Factor's, a run of rows at a time: one tile's rows share a
  // factor, and a division per row cost more than a decode call's GEMM).
  static void Factors(const Fp8Operand& o, bool trans, int64_t row0, int64_t count, int64_t kb,
                      int64_t rows_total, int64_t k_total, float* factors) {
    const int64_t run = o.scaling == Fp8Scaling::kTiles ? o.block : 1;
    for (int64_t r = 0; r < count;) {
      const float f = Fp8Pack<K>::Factor(o, trans, row0 + r, kb, rows_total, k_total);
      const int64_t end = Min(count, ((row0 + r) / run + 1) * run - row0);
      for (; r < end; ++r) factors[r] = f;
    }
  }

  // GemmFp8 with block scaling, every K block of a tile in turn: A and B
  // packed over all of K once per row block and column block, then for each
  // tile the blocks' sums from zero, each scaled into C while the tile is in
  // L1. The blocks by K outermost (Run's order) sent all of C through the
  // caches once per block, 128 of K: six round trips for K = 768 where a
  // bf16 GEMM makes one. Each C element sees the same blocks in the same
  // order with the same factors as in Run, so the bits are Run's. False
  // (nothing done) where it does not apply: a bf16 C, a B packed whole by
  // the caller, an odd K block of k-pairs, a K so long that kMr rows of A
  // outgrow 512 KiB, or scratch too small.
  template <typename T>
  static bool RunScaled(const Problem& p, const Region& r, std::byte* scratch, size_t bytes) {
    constexpr bool kBf16 = Bf16Kernel<T>();
    const int64_t kKc = KBlock<T>(p);
    const int64_t block_steps = K::Steps(kBf16, kKc);
    if (p.bf16_out || p.packed_b != nullptr || (kBf16 && kKc % 2 != 0)) return false;
    // A row-major tier's blocks must be whole tiles of its steps.
    if (OwnFp8Packing() && K::Steps(kBf16, kKc) * 2 != kKc) return false;
    const int64_t blocks = (p.k + kKc - 1) / kKc;
    const int64_t all_steps = K::Steps(kBf16, p.k);  // block b's steps start at b * block_steps
    // The A block at most half of a 1 MiB L2; scratch: B block, A block, an
    // edge tile and the blocks' factors.
    constexpr int64_t kAMaxBytes = int64_t{512} << 10;
    int64_t mc = Min(K::kMc, kAMaxBytes / (all_steps * 4) / K::kMr * K::kMr);
    if (mc < K::kMr) return false;
    // As many of the region's columns as scratch holds: each column block
    // packs all of the thread's A again (three times on 4096 x 3072 x 768
    // at kNc), where one more B column costs only its own packing.
    int64_t nc = RoundUp(r.n1 - r.n0, K::kNr);
    const auto need = [&](int64_t n) {
      return (all_steps * (n + mc) + K::kMr * K::kNr + blocks * (n + mc)) * 4;
    };
    while (need(nc) > static_cast<int64_t>(bytes) && nc > K::kNr) nc = RoundUp(nc / 2, K::kNr);
    if (need(nc) > static_cast<int64_t>(bytes)) return false;
    auto* bp = reinterpret_cast<uint32_t*>(scratch);
    uint32_t* ap = bp + all_steps * nc;
    auto* tile = reinterpret_cast<float*>(ap + mc * all_steps);
    float* sb = tile + K::kMr * K::kNr;  // [blocks][nc]
    float* sa = sb + blocks * nc;        // [blocks][mc]
    for (int64_t jc = r.n0; jc < r.n1; jc += nc) {
      const int64_t ncols_c = Min(nc, r.n1 - jc);
      PackB<T>(p, 0, jc, p.k, ncols_c, bp);
      for (int64_t b = 0; b < blocks; ++b) {
        Factors(p.fp8->b, !p.trans_b, jc, ncols_c, b, p.n, p.k, sb + b * nc);
      }
      for (int64_t ic = r.m0; ic < r.m1; ic += mc) {
        const int64_t mrows = Min(mc, r.m1 - ic);
        if constexpr (OwnFp8Packing()) {
          // Row-major panels, one per (row panel, K block): block b of the
          // panel of rows ir at ap + ir * all_steps + b * block_steps * kMr,
          // rows its own steps apart, as the kernels below read them.
          for (int64_t ir = 0; ir < mrows; ir += K::kMr) {
            for (int64_t b = 0; b < blocks; ++b) {
              PackA<T>(p, b * kKc, ic + ir, Min(kKc, p.k - b * kKc), Min(K::kMr, mrows - ir),
                       ap + ir * all_steps + b * block_steps * K::kMr);
            }
          }
        } else {
          PackA<T>(p, 0, ic, p.k, mrows, ap);
        }
        for (int64_t b = 0; b < blocks; ++b) {
          Factors(p.fp8->a, false, ic, mrows, b, p.m, p.k, sa + b * mc);
        }
        for (int64_t jr = 0; jr < ncols_c; jr += K::kNr) {
          const int64_t ncols = Min(K::kNr, ncols_c - jr);
          for (int64_t ir = 0; ir < mrows; ir += K::kMr) {
            const int64_t nrows = Min(K::kMr, mrows - ir);
            float* ct = static_cast<float*>(p.c) + (ic + ir) * p.ldc + jc + jr;
            for (int64_t b = 0; b < blocks; ++b) {
              const int64_t s0 = b * block_steps, steps = Min(block_steps, all_steps - s0);
              const uint32_t* apanel = ap + ir * all_steps + s0 * K::kMr;
              const uint32_t* bpanel = bp + jr * all_steps + s0 * K::kNr;
              const float* fa = sa + b * mc + ir;
              const float* fb = sb + b * nc + jr;
              const bool add = b > 0 || p.accumulate;
              if (nrows == K::kMr && ncols == K::kNr &&
                  K::MicroScaled(kBf16, steps, apanel, bpanel, K::kNr, nullptr, ct, p.ldc, fa, fb,
                                 add)) {
                continue;
              }
              if (nrows == K::kMr || !K::MicroRows(kBf16, nrows, steps, apanel, bpanel, K::kNr,
                                                   nullptr, tile, K::kNr, false)) {
                K::Micro(kBf16, steps, apanel, bpanel, K::kNr, nullptr, tile, K::kNr, false);
              }
              BlockUpdate(tile, ct, p.ldc, nrows, ncols, fa, fb, add);
            }
          }
        }
      }
    }
    return true;
  }

  template <typename T>
  static void Run(const Problem& p, const Region& r, std::byte* scratch, size_t bytes) {
    constexpr bool kFp8 = kIsFp8<T>;
    if constexpr (kFp8) {
      if (p.fp8->block_scaled && RunScaled<T>(p, r, scratch, bytes)) return;
    }
    constexpr bool kBf16 = Bf16Kernel<T>();
    constexpr int64_t kKcMax = K::KBlock(kBf16);
    constexpr int64_t kSteps = K::Steps(kBf16, kKcMax);
    static_assert((kSteps * K::kNr + K::kMc * kSteps + 2 * K::kMr * K::kNr) * 4 <=
                      static_cast<int64_t>(kMinScratchBytes),
                  "the least scratch must hold an A block and one B micro-panel");
    const Scratch s = Carve(scratch, bytes, kSteps);
    const int64_t kKc = KBlock<T>(p);
    const bool scaled = kFp8 && p.fp8->block_scaled;
    float sb[kFp8 ? K::kNc : 1];  // block scaling: this K block's factors of B's columns
    float sa[kFp8 ? K::kMc : 1];  // and of A's rows
    for (int64_t jc = r.n0; jc < r.n1; jc += s.nc_max) {
      const int64_t nc = Min(s.nc_max, r.n1 - jc);
      const int64_t mb_step = p.bf16_out ? s.panel_rows : r.m1 - r.m0;
      for (int64_t mb = r.m0; mb < r.m1; mb += mb_step) {
        const int64_t mrows = Min(mb_step, r.m1 - mb);
        // An f32 C holds its own partials; a bf16 C gets them in the f32 panel.
        float* part = s.panel;
        int64_t ldp = RoundUp(nc, K::kNr);
        if (!p.bf16_out) {
          part = static_cast<float*>(p.c) + mb * p.ldc + jc;
          ldp = p.ldc;
        } else if (p.accumulate) {
          const BF16* c = static_cast<const BF16*>(p.c) + mb * p.ldc + jc;
          for (int64_t i = 0; i < mrows; ++i) K::WidenRow(c + i * p.ldc, part + i * ldp, nc);
        }
        const bool in_place = std::is_same_v<T, float> && p.packed_b == nullptr && !p.trans_b &&
                              mrows <= kInPlaceRows && p.ldb <= K::kInPlaceMaxLdb &&
                              (K::kInPlaceAliasLdb == 0 || p.ldb % K::kInPlaceAliasLdb != 0);
        const int64_t full_cols = nc / K::kNr * K::kNr;  // in place: the whole panels
        for (int64_t pc = 0; pc < p.k; pc += kKc) {
          const int64_t kc = Min(kKc, p.k - pc);
          const int64_t steps = K::Steps(kBf16, kc);
          const bool add = pc > 0 || p.accumulate;
          // B's block: packed now, or already (B packed whole: PackWhole),
          // or read in place (then only a partial last panel is packed).
          const uint32_t* bp = s.bp;
          if (p.packed_b != nullptr) {
            bp = p.packed_b + (pc / kKc) * K::Steps(kBf16, kKc) * RoundUp(p.n, K::kNr) +
                 jc * steps;
          } else if (in_place) {
            if (full_cols < nc) PackB<T>(p, pc, jc + full_cols, kc, nc - full_cols, s.bp);
          } else {
            PackB<T>(p, pc, jc, kc, nc, s.bp);
          }
          if (scaled) Factors(p.fp8->b, !p.trans_b, jc, nc, pc / kKc, p.n, p.k, sb);
          for (int64_t ic = mb; ic < mb + mrows; ic += K::kMc) {
            const int64_t mc = Min(K::kMc, mb + mrows - ic);
            PackA<T>(p, pc, ic, kc, mc, s.ap);
            if (scaled) Factors(p.fp8->a, false, ic, mc, pc / kKc, p.m, p.k, sa);
            for (int64_t jr = 0; jr < nc; jr += K::kNr) {
              const int64_t ncols = Min(K::kNr, nc - jr);
              const uint32_t* bpanel = bp + jr * steps;
              int64_t b_step = K::kNr;
              if (in_place && jr < full_cols) {
                bpanel = static_cast<const uint32_t*>(p.b) + pc * p.ldb + jc + jr;
                b_step = p.ldb;
              } else if (in_place) {
                bpanel = s.bp;
              }
              // B packed whole (PackedB: decoding's weights) comes from DRAM,
              // for which the kernels' 16 steps ahead are too few: while the
              // row tiles read this panel, the one after it in memory (the
              // next they read while K is one block) is brought into L2. The
              // small model's bf16 rollouts at batch 32: +6.5%, asked by
              // every row tile (by the first alone: +3%).
              const uint32_t* b_next =
                  p.packed_b != nullptr ? bpanel + steps * K::kNr : nullptr;
              for (int64_t ir = 0; ir < mc; ir += K::kMr) {
                const int64_t nrows = Min(K::kMr, mc - ir);
                const uint32_t* apanel = s.ap + ir * steps;
                float* ct = part + (ic - mb + ir) * ldp + jr;
                if (scaled) {  // the block's tile from zero, then scaled into C
                  if (nrows == K::kMr && ncols == K::kNr &&
                      K::MicroScaled(kBf16, steps, apanel, bpanel, b_step, b_next, ct, ldp, sa + ir,
                                     sb + jr, add)) {
                    continue;
                  }
                  if (nrows == K::kMr || !K::MicroRows(kBf16, nrows, steps, apanel, bpanel, b_step,
                                                       b_next, s.tile, K::kNr, false)) {
                    K::Micro(kBf16, steps, apanel, bpanel, b_step, b_next, s.tile, K::kNr, false);
                  }
                  BlockUpdate(s.tile, ct, ldp, nrows, ncols, sa + ir, sb + jr, add);
                  continue;
                }
                if (nrows == K::kMr && ncols == K::kNr) {
                  K::Micro(kBf16, steps, apanel, bpanel, b_step, b_next, ct, ldp, add);
                  continue;
                }
                if (ncols == K::kNr && K::MicroRows(kBf16, nrows, steps, apanel, bpanel, b_step,
                                                    b_next, ct, ldp, add)) {
                  continue;
                }
                // Edge tile: the same kernel on a padded copy; the valid part goes back.
                if (add) {
                  for (int64_t i = 0; i < nrows; ++i)
                    for (int64_t j = 0; j < ncols; ++j) s.tile[i * K::kNr + j] = ct[i * ldp + j];
                }
                K::Micro(kBf16, steps, apanel, bpanel, b_step, b_next, s.tile, K::kNr, add);
                for (int64_t i = 0; i < nrows; ++i)
                  for (int64_t j = 0; j < ncols; ++j) ct[i * ldp + j] = s.tile[i * K::kNr + j];
              }
            }
          }
        }
        if (p.bf16_out) {
          BF16* c = static_cast<BF16*>(p.c) + mb * p.ldc + jc;
          for (int64_t i = 0; i < mrows; ++i) K::RoundRow(part + i * ldp, c + i * p.ldc, nc);
        }
      }
    }
  }
};

}  // namespace anvil::kernels::gemm_internal
