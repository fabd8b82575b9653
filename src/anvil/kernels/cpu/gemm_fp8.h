// GemmFp8's pieces for the packed driver (gemm_driver.h): packing FP8 codes
// as decoded values (bf16 k-pairs for a tier with a bf16 dot, f32 words
// otherwise; MX scales folded in, exactly) and the scale factors of a K
// block for the block epilogue. Templates on the tier K (as the driver), so
// each ISA unit gets its own symbols.
#pragma once

#include <cstddef>
#include <cstdint>

#include "anvil/kernels/cpu/gemm_internal.h"

namespace anvil::kernels::gemm_internal {

// One GemmFp8 call as the streaming paths read it (Fp8Pack::StreamCall).
struct Fp8StreamCall {
  const Fp8StreamB* b;
  int64_t m, n, k;
  int64_t kblock, kblocks;      // the K block of the order and their count
  int64_t mx_block, mx_blocks;  // B's MX block and their count along K (kMx), else 0
  bool scaled, accumulate;      // block scaling; C (+)=
  const float* a_f32;           // A's values [m][k] (f32 decode)
  const uint32_t* a_pairs;      // A's bf16 k-pairs [m][ceil(k / 2)] (bf16 pairs)
  const float* sa;              // block scaling: A's factors [m][kblocks]
  float* c;
  int64_t ldc;
};

template <class K>
struct Fp8Pack {
  static uint32_t Bits(float x) { return __builtin_bit_cast(uint32_t, x); }
  static float FromBits(uint32_t u) { return __builtin_bit_cast(float, u); }
  // 2^(e - 127) for an E8M0 code (0: 2^-127; 0xFF: NaN).
  static float Pow2(uint8_t e) {
    return FromBits(e == 0xFF ? 0x7FC00000u : (e == 0 ? 0x00400000u : uint32_t{e} << 23));
  }
  // bf16 bits of x, round to nearest even (exact for every decoded value in
  // bf16's normal range).
  static uint32_t Bf16(float x) {
    const uint32_t u = Bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
    return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  }

  // The decoded element at stored row `row`, K index `k` (its code `q`).
  static float Value(const Fp8Operand& o, const float* values, uint8_t q, int64_t row, int64_t k,
                     int64_t k_total) {
    const float v = values[q];
    if (o.scaling != Fp8Scaling::kMx) return v;
    return v * Pow2(o.e8m0[row * ((k_total + o.block - 1) / o.block) + k / o.block]);
  }

  // Packs op(X)'s rows [r0, r0 + rows) x K [p0, p0 + kc) as kPanel-row
  // micro-panels (A: rows are m, kPanel = kMr; B: rows are n, kPanel = kNr):
  // word (s, r) of panel q at q * kPanel * steps + s * kPanel + r, with steps
  // k-pairs (kPairs: bf16 bits, even k low) or k values (f32 bits); past the
  // rows or K, zeros. `trans`: X is stored [k, rows] (else [rows, k]).
  // `values`: the format's 256 values; `bf16`: their bf16 bits.
  template <int64_t kPanel, bool kPairs>
  static void Pack(const Fp8Operand& o, const float* values, const uint16_t* bf16, int64_t ld,
                   bool trans, int64_t r0, int64_t rows, int64_t p0, int64_t kc, int64_t k_total,
                   uint32_t* out) {
    // The tier's vector packer where it has one (the same words).
    if (K::PackFp8Vector(o, values, bf16, ld, trans, r0, rows, p0, kc, k_total,
                         static_cast<int>(kPanel), kPairs, out)) {
      return;
    }
    const int64_t steps = kPairs ? (kc + 1) / 2 : kc;
    const bool mx = o.scaling == Fp8Scaling::kMx;
    const int64_t mx_blocks = mx ? (k_total + o.block - 1) / o.block : 0;
    // One element as its packed half-word (bf16 bits) or word (f32 bits).
    auto encode = [&](uint8_t q, float factor) -> uint32_t {
      if (!mx) return kPairs ? uint32_t{bf16[q]} : Bits(values[q]);
      const float v = values[q] * factor;
      return kPairs ? Bf16(v) : Bits(v);
    };
    // (r, k) -> word index in the panels, for k < kc (pairs: the half by k's parity).
    auto put = [&](int64_t r, int64_t k, uint32_t w) {
      uint32_t* panel = out + (r / kPanel) * kPanel * steps + r % kPanel;
      if constexpr (kPairs) {
        uint32_t& word = panel[(k / 2) * kPanel];
        word = (k % 2 == 0) ? w : (word | (w << 16));
      } else {
        panel[k * kPanel] = w;
      }
    };
    const int64_t padded = (rows + kPanel - 1) / kPanel * kPanel;
    // Rows past the matrix, and an odd kc's last high half, are zero.
    for (int64_t r = rows; r < padded; ++r) {
      for (int64_t s = 0; s < steps; ++s)
        out[(r / kPanel) * kPanel * steps + s * kPanel + r % kPanel] = 0;
    }
    if (!trans) {  // stored [rows, k]: each row's codes are contiguous
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* codes = o.data + (r0 + r) * ld + p0;
        const uint8_t* e8m0 = mx ? o.e8m0 + (r0 + r) * mx_blocks : nullptr;
        for (int64_t k = 0; k < kc;) {
          // A run of k with one MX factor (the whole range without MX).
          const int64_t kk = p0 + k;
          const int64_t end = mx ? (kk / o.block + 1) * o.block - p0 : kc;
          const int64_t stop = end < kc ? end : kc;
          const float factor = mx ? Pow2(e8m0[kk / o.block]) : 1.0f;
          for (; k < stop; ++k) put(r, k, encode(codes[k], factor));
        }
        if (kPairs && kc % 2 != 0) put(r, kc, 0);
      }
    } else {  // stored [k, rows]: each k's codes are contiguous over the rows
      for (int64_t k = 0; k < kc; ++k) {
        const uint8_t* codes = o.data + (p0 + k) * ld + r0;
        for (int64_t r = 0; r < rows; ++r) {
          const float factor = mx ? Pow2(o.e8m0[(r0 + r) * mx_blocks + (p0 + k) / o.block]) : 1.0f;
          put(r, k, encode(codes[r], factor));
        }
      }
      if (kPairs && kc % 2 != 0) {
        for (int64_t r = 0; r < rows; ++r) put(r, kc, 0);
      }
    }
  }

  // A call of the streaming paths (gemm_avx512_fp8_decode.cc,
  // gemm_avx2_fp8_decode.cc) as they read it: its blocks, and A's rows
  // decoded into `scratch` as Pack decodes them (MX factors folded in; f32
  // values, or bf16 k-pairs where `pairs`) with their block factors.
  // `a_gain` (f32 values of a non-MX A only) multiplies them by a power of
  // two, exactly: such values are the format's own (finite ones |v| <=
  // 57344, normal or zero), so a gain up to 2^64 keeps each finite one
  // finite and exact (zeros, infinities and NaN keep theirs), and a product
  // with them equals the product with A times the gain.
  static Fp8StreamCall StreamCall(const Problem& p, bool pairs, std::byte* scratch,
                                  float a_gain = 1.0f) {
    const Fp8Problem& f = *p.fp8;
    Fp8StreamCall j{};
    j.b = f.stream_b;
    j.m = p.m;
    j.n = p.n;
    j.k = p.k;
    j.kblock = f.kblock;
    j.kblocks = (p.k + f.kblock - 1) / f.kblock;
    if (f.b.scaling == Fp8Scaling::kMx) {
      j.mx_block = f.b.block;
      j.mx_blocks = (p.k + f.b.block - 1) / f.b.block;
    }
    j.scaled = f.block_scaled;
    j.accumulate = p.accumulate;
    j.c = static_cast<float*>(p.c);
    j.ldc = p.ldc;
    const Fp8Operand& a = f.a;
    const bool mx = a.scaling == Fp8Scaling::kMx;
    const auto* codes = static_cast<const uint8_t*>(p.a);
    auto* at = reinterpret_cast<float*>(scratch);
    if (pairs) {
      auto* words = reinterpret_cast<uint32_t*>(at);
      const int64_t lines = (p.k + 1) / 2;
      for (int64_t i = 0; i < p.m; ++i) {
        for (int64_t k = 0; k < p.k; ++k) {
          const uint8_t q = codes[i * p.lda + k];
          const uint32_t bits = mx ? Bf16(Value(a, f.value_a, q, i, k, p.k)) : f.bf16_a[q];
          uint32_t& w = words[i * lines + k / 2];
          w = k % 2 == 0 ? bits : (w | bits << 16);  // an odd K's last high half stays zero
        }
      }
      j.a_pairs = words;
      at += p.m * lines;
    } else {
      if (a_gain != 1.0f && mx) __builtin_trap();  // MX values need not stay finite
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t k = 0; k < p.k; ++k)
          at[i * p.k + k] = Value(a, f.value_a, codes[i * p.lda + k], i, k, p.k) * a_gain;
      j.a_f32 = at;
      at += p.m * p.k;
    }
    if (j.scaled) {
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t kb = 0; kb < j.kblocks; ++kb)
          at[i * j.kblocks + kb] = Factor(a, false, i, kb, p.m, p.k);
      j.sa = at;
    }
    return j;
  }

  // The factor of stored row `row` (m for A; n for B) in K block `kb` (of
  // length S = kblock), 1 for kMx (folded into the values).
  static float Factor(const Fp8Operand& o, bool trans, int64_t row, int64_t kb, int64_t rows_total,
                      int64_t k_total) {
    switch (o.scaling) {
      case Fp8Scaling::kTensor:
        return o.scale;
      case Fp8Scaling::kMx:
        return 1.0f;
      case Fp8Scaling::kRowBlocks:
        return o.scales[row * ((k_total + o.block - 1) / o.block) + kb];
      case Fp8Scaling::kTiles: {
        // Tiles of the stored operand: [rows, k] (not trans) or [k, rows] (trans).
        const int64_t tiles_k = (k_total + o.block - 1) / o.block;
        const int64_t tiles_r = (rows_total + o.block - 1) / o.block;
        return trans ? o.scales[kb * tiles_r + row / o.block]
                     : o.scales[(row / o.block) * tiles_k + kb];
      }
    }
    return 1.0f;
  }
};

}  // namespace anvil::kernels::gemm_internal
