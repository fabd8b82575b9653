// Integer GEMMs (gemm_int.h): weight and activation quantization, the tier
// choice, the thread split over column panels, and the scalar tier's panel
// kernel (which reads the same packed layout as the SIMD ones).
#include "anvil/kernels/gemm_int.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "anvil/core/check.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace {

using gemm_int_internal::Int8Rows;
using gemm_int_internal::Kernels;
using gemm_int_internal::PanelTask;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
// Below this many multiply-adds one thread does the whole call.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 17;
// int8 sums over one group fit int32 on every tier up to this K (the VNNI
// kernel's offset operand reaches 255 * 127 per product).
constexpr int64_t kMaxInt8K = 65536;
// Zero bytes after the last panel: the AMX kernel reads whole tiles of 16
// lines, up to 15 past a panel's last (against zero activations).
constexpr size_t kCodesTail = 1024;
static_assert(kCodesTail >= 15 * 64, "the AMX kernel's last tile reads 15 lines of 64 bytes past");

// The code of v under `inv` (= max_code / amax): round to nearest even,
// clamped; 0 where the block is not finite (its scale is NaN) or its inverse
// overflowed (an amax below ~4e-37), so no NaN reaches the integer cast.
int Encode(float v, float inv, int max_code) {
  const float r = std::nearbyint(v * inv);
  if (!std::isfinite(r)) return 0;
  return static_cast<int>(std::clamp(r, static_cast<float>(-max_code), static_cast<float>(max_code)));
}

// amax of n values at stride `stride`; NaN if any is an infinity or a NaN.
float AmaxOf(const float* x, int64_t n, int64_t stride) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i * stride];
    if (!std::isfinite(v)) return kNaN;
    amax = std::max(amax, std::fabs(v));
  }
  return amax;
}

// The scale and the inverse used to encode, for a block of this amax.
struct BlockScaleOf {
  float scale = 0;  // s: dequantized = code * s
  float inv = 0;    // code = rne(v * inv)
  BlockScaleOf(float amax, int max_code) {
    if (amax != amax) {
      scale = kNaN;
    } else if (amax > 0) {
      scale = amax / static_cast<float>(max_code);
      inv = static_cast<float>(max_code) / amax;
    }
  }
};

// The scalar tier: one row, int32 sums from the packed lines.
void ScalarPanel(const PanelTask& t, bool int4) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const int8_t* q = t.q + r * t.ld;
    for (int c = 0; c < t.columns; ++c) {
      float s = 0;
      for (int64_t g = 0; g < t.groups; ++g) {
        const int64_t l0 = g * t.lines_per_group;
        const int64_t l1 = std::min(t.lines, l0 + t.lines_per_group);
        int32_t acc = 0;
        for (int64_t l = l0; l < l1; ++l) {
          const uint8_t* line = t.lines_data + l * 64 + c * 4;
          for (int i = 0; i < 4; ++i) {
            if (int4) {
              acc += (static_cast<int>(line[i] & 15) - 8) * q[l * 8 + i];
              acc += (static_cast<int>(line[i] >> 4) - 8) * q[l * 8 + 4 + i];
            } else {
              acc += static_cast<int8_t>(line[i]) * q[l * 4 + i];
            }
          }
        }
        const float f = static_cast<float>(acc);
        const float sw = t.scales[g * t.scale_stride + c];
        s = g == 0 ? f * sw : std::fma(f, sw, s);
      }
      const float out = s * t.row_scales[r];
      float& y = t.y[r * t.ldy + c];
      y = t.accumulate ? y + out : out;
    }
  }
}

const Kernels& ScalarKernels() {
  static constexpr Kernels kKernels = {
      [](const PanelTask& t) { ScalarPanel(t, false); },
      [](const PanelTask& t) { ScalarPanel(t, true); },
      1,
  };
  return kKernels;
}

// The scalar tier of the activation rows (gemm_int_internal.h).
void ScalarEncodeRow(const float* x, int64_t k, int64_t ld, float inv, int8_t* q, uint8_t* q_u8,
                     int32_t* sums) {
  int32_t sum = 0;
  for (int64_t kk = 0; kk < ld; ++kk) {
    const int code = kk < k ? Encode(x[kk], inv, 127) : 0;
    if (q != nullptr) q[kk] = static_cast<int8_t>(code);
    if (q_u8 != nullptr) q_u8[kk] = static_cast<uint8_t>(code + 128);
    sum += code;
    if (kk % kInt4Group == kInt4Group - 1 || kk == k - 1) {
      if (kk < k) sums[kk / kInt4Group] = sum;
      sum = 0;
    }
  }
}

const gemm_int_internal::RowQuantizer& RowQuantizerFor(Isa isa) {
  static_assert(gemm_int_internal::kRowGroup == kInt4Group);
  static constexpr gemm_int_internal::RowQuantizer kScalar = {
      [](const float* x, int64_t k) { return AmaxOf(x, k, 1); }, ScalarEncodeRow};
  switch (isa) {
    case Isa::kAvx512:
      return gemm_int_internal::Avx512RowQuantizer();
    case Isa::kAvx2:
      return gemm_int_internal::Avx2RowQuantizer();
    case Isa::kScalar:
      break;
  }
  return kScalar;
}

// The kernels for a call of m rows.
const Kernels& KernelsFor(const KernelCtx& ctx, int64_t m) {
  const Isa isa = ctx.isa();
  if (isa == Isa::kAvx512 && GetCpuFeatures().avx512_vnni) {
    // ctx.amx(): the tier is avx512 and the process may use the tiles. Fewer
    // rows than a tile would all take AmxKernels' one-panel VNNI remainder
    // (12 x 768 x 768: 0.7x), so they take the VNNI kernels, wide ones
    // included: the same bits.
    constexpr int64_t kTileRows = 16;
    return ctx.amx() && GetCpuFeatures().amx_int8 && m >= kTileRows
               ? gemm_int_internal::AmxKernels()
               : gemm_int_internal::Avx512Kernels();
  }
  if (isa != Isa::kScalar) {
    return GetCpuFeatures().avx_vnni ? gemm_int_internal::AvxVnniKernels()
                                     : gemm_int_internal::Avx2Kernels();
  }
  return ScalarKernels();
}

// Asks for bytes [from, to) of `p` to come into L2.
void PrefetchRows(const void* p, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; i += 64) __builtin_prefetch(static_cast<const char*>(p) + i, 0, 2);
}

}  // namespace

int64_t IntWeights::bytes() const {
  return padded_n() / 16 * lines() * 64 + groups_ * padded_n() * 4 +
         (bits_ == IntBits::kInt8 ? padded_n() * 4 : 0);
}

int IntWeights::Code(int64_t kk, int64_t j) const {
  const uint8_t* line = panel(j / 16) + (kk / k_per_line()) * 64 + (j % 16) * 4;
  const int64_t i = kk % k_per_line();
  if (bits_ == IntBits::kInt8) return static_cast<int8_t>(line[i]);
  return (i < 4 ? (line[i] & 15) : (line[i - 4] >> 4)) - 8;
}

IntWeights QuantizeWeightsInt(const KernelCtx& ctx, int64_t k, int64_t n, const float* w,
                              int64_t ldw, IntBits bits) {
  ANVIL_TRACE_ZONE("quantize_weights_int");
  CHECK(k > 0 && n > 0) << "QuantizeWeightsInt: k and n must be > 0, got " << k << ", " << n;
  if (ldw == 0) ldw = n;
  CHECK_GE(ldw, n) << "QuantizeWeightsInt: ldw";
  const bool int4 = bits == IntBits::kInt4;
  CHECK(int4 || k <= kMaxInt8K) << "QuantizeWeightsInt: int8 weights take k <= " << kMaxInt8K
                                << ", got " << k;
  IntWeights out;
  out.k_ = k;
  out.n_ = n;
  out.bits_ = bits;
  out.group_ = int4 ? kInt4Group : k;
  out.groups_ = (k + out.group_ - 1) / out.group_;
  const int64_t pn = out.padded_n(), panels = pn / 16, lines = out.lines();
  const int max_code = int4 ? 7 : 127;
  out.codes_ = AlignedBuffer(static_cast<size_t>(panels * lines * 64 + kCodesTail));
  std::memset(out.codes_.data() + panels * lines * 64, 0, kCodesTail);
  out.extra_ = AlignedBuffer(static_cast<size_t>((out.groups_ + 1) * pn * 4));
  out.scales_ = reinterpret_cast<float*>(out.extra_.data());
  out.sums_ = reinterpret_cast<int32_t*>(out.scales_ + out.groups_ * pn);
  uint8_t* codes = reinterpret_cast<uint8_t*>(out.codes_.data());
  const int64_t kpl = out.k_per_line(), group = out.group_, groups = out.groups_;
  ctx.pool().ParallelFor(panels, [&](int64_t b, int64_t e, int) {
    for (int64_t p = b; p < e; ++p) {
      uint8_t* panel = codes + p * lines * 64;
      std::memset(panel, int4 ? 0x88 : 0, static_cast<size_t>(lines * 64));  // code 0
      for (int c = 0; c < 16; ++c) {
        const int64_t j = p * 16 + c;
        int32_t sum = 0;
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t k0 = g * group, k1 = std::min(k, k0 + group);
          const BlockScaleOf s(j < n ? AmaxOf(w + k0 * ldw + j, k1 - k0, ldw) : 0.0f, max_code);
          out.scales_[g * pn + j] = s.scale;
          for (int64_t kk = k0; kk < k1 && j < n; ++kk) {
            const int code = Encode(w[kk * ldw + j], s.inv, max_code);
            sum += code;
            uint8_t& byte = panel[(kk / kpl) * 64 + c * 4 + (kk % kpl) % 4];
            if (!int4) {
              byte = static_cast<uint8_t>(static_cast<int8_t>(code));
            } else if (kk % kpl < 4) {
              byte = static_cast<uint8_t>((byte & 0xF0) | (code + 8));
            } else {
              byte = static_cast<uint8_t>((byte & 0x0F) | ((code + 8) << 4));
            }
          }
        }
        out.sums_[j] = sum;
      }
    }
  });
  return out;
}

size_t IntRowsBytes(int64_t m, int64_t k) {
  const int64_t ld = (k + 63) / 64 * 64, groups = (k + kInt4Group - 1) / kInt4Group;
  return AlignUp(static_cast<size_t>(m * ld)) * 2 + AlignUp(static_cast<size_t>(m) * 4) +
         AlignUp(static_cast<size_t>(m * groups) * 4);
}

IntRows QuantizeRowsInt8(const KernelCtx& ctx, int64_t m, int64_t k, const float* x, int64_t ldx,
                         void* memory, const IntWeights* for_weights) {
  ANVIL_TRACE_ZONE("quantize_rows_int8");
  CHECK(m >= 0 && k > 0) << "QuantizeRowsInt8: m " << m << ", k " << k;
  if (ldx == 0) ldx = k;
  CHECK_GE(ldx, k) << "QuantizeRowsInt8: ldx";
  CHECK(memory != nullptr && reinterpret_cast<uintptr_t>(memory) % kAlignment == 0)
      << "QuantizeRowsInt8: memory must be 64-byte aligned";
  IntRows a;
  a.m = m;
  a.k = k;
  a.ld = (k + 63) / 64 * 64;
  const int64_t groups = (k + kInt4Group - 1) / kInt4Group;
  // For one GEMM, only the codes its kernels read (gemm_int_internal::
  // Int8Rows): both copies are twice the bytes written and read back, which
  // cost Zen 5's W8A8 4096 x 768 x 768 7-13% while the host's memory was busy.
  Int8Rows codes = Int8Rows::kBoth;
  if (for_weights != nullptr) {
    codes =
        for_weights->bits() == IntBits::kInt4 ? Int8Rows::kSigned : KernelsFor(ctx, m).int8_rows;
  }
  auto* bytes = static_cast<std::byte*>(memory);
  a.q = codes != Int8Rows::kUnsigned ? reinterpret_cast<int8_t*>(bytes) : nullptr;
  bytes += AlignUp(static_cast<size_t>(m * a.ld));
  a.q_u8 = codes != Int8Rows::kSigned ? reinterpret_cast<uint8_t*>(bytes) : nullptr;
  bytes += AlignUp(static_cast<size_t>(m * a.ld));
  a.scales = reinterpret_cast<float*>(bytes);
  bytes += AlignUp(static_cast<size_t>(m) * 4);
  a.group_sums = reinterpret_cast<int32_t*>(bytes);
  const gemm_int_internal::RowQuantizer& tier = RowQuantizerFor(ctx.isa());
  auto rows = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      const float* xi = x + i * ldx;
      const BlockScaleOf s(tier.amax(xi, k), 127);
      a.scales[i] = s.scale;
      int8_t* q = a.q != nullptr ? a.q + i * a.ld : nullptr;
      uint8_t* q_u8 = a.q_u8 != nullptr ? a.q_u8 + i * a.ld : nullptr;
      int32_t* sums = a.group_sums + i * groups;
      if (std::isfinite(s.inv) && s.inv != 0) {
        tier.encode(xi, k, a.ld, s.inv, q, q_u8, sums);
      } else {  // Encode's 0 for every value: a zero, non-finite or tiny amax
        if (q != nullptr) std::memset(q, 0, a.ld);
        if (q_u8 != nullptr) std::memset(q_u8, 128, a.ld);
        std::fill(sums, sums + groups, 0);
      }
    }
  };
  if (m * k < kMinMacsPerThread) {
    rows(0, m, 0);
  } else {
    ctx.pool().ParallelFor(m, rows);
  }
  return a;
}

void GemmInt(const KernelCtx& ctx, const IntRows& a, const IntWeights& w, float* y, int64_t ldy,
             bool accumulate) {
  ANVIL_TRACE_ZONE(w.bits() == IntBits::kInt8 ? "gemm_w8a8" : "gemm_w4a8");
  CHECK_EQ(a.k, w.k()) << "GemmInt: the activations' k differs from the weights'";
  if (ldy == 0) ldy = w.n();
  CHECK_GE(ldy, w.n()) << "GemmInt: ldy";
  if (a.m == 0) return;
  CHECK(y != nullptr) << "GemmInt: y is null";
  const Kernels& kernels = KernelsFor(ctx, a.m);
  const bool int4 = w.bits() == IntBits::kInt4;
  const Int8Rows reads = int4 ? Int8Rows::kSigned : kernels.int8_rows;
  CHECK((reads == Int8Rows::kUnsigned || a.q != nullptr) &&
        (reads == Int8Rows::kSigned || a.q_u8 != nullptr))
      << "GemmInt: the rows were quantized for other weights or another context";
  const int64_t panels = w.padded_n() / 16, groups = (a.k + kInt4Group - 1) / kInt4Group;
  PanelTask base;
  base.lines = w.lines();
  base.lines_per_group = int4 ? kInt4Group / 8 : w.lines();
  base.groups = w.groups();
  base.scale_stride = w.padded_n();
  base.ld = a.ld;
  base.ldy = ldy;
  base.accumulate = accumulate;
  // Weights from DRAM (the model's outgrow the caches, or these alone do):
  // prefetched ahead (kPrefetchLines).
  constexpr int64_t kCachedCodeBytes = int64_t{8} << 20;
  if (ctx.weights_outgrow_caches() || panels * w.lines() * 64 > kCachedCodeBytes) {
    base.prefetch_bytes = gemm_int_internal::kPrefetchLines * 64;
  }
  // Many rows: groups of wide_panels panels through the wide kernel where
  // the tier has one (a panel group left short takes the one-panel kernel).
  const gemm_int_internal::PanelFn wide_kernel = int4 ? kernels.int4_wide : kernels.int8_wide;
  const bool wide = wide_kernel != nullptr && a.m > kernels.max_rows;
  const int64_t group = wide ? kernels.wide_panels : 1;
  const int64_t units = (panels + group - 1) / group;
  auto tile = [&](PanelTask& t, int64_t p, int64_t r0, int64_t rows) {
    t.lines_data = w.panel(p);
    t.scales = w.scales() + p * 16;
    t.column_sums = w.column_sums() + p * 16;
    t.rows = rows;
    t.q = a.q != nullptr ? a.q + r0 * a.ld : nullptr;
    t.q_u8 = a.q_u8 != nullptr ? a.q_u8 + r0 * a.ld : nullptr;
    t.row_scales = a.scales + r0;
    t.group_sums = a.group_sums + r0 * groups;
    t.y = y + r0 * ldy + p * 16;
  };
  // Rows in chunks whose codes stay in L2 while a thread's panels go by
  // (every panel reads all the rows): for 4096 rows of 768 they came from L3
  // again for each panel group (Zen 5, w8a8 4096 x 768 x 768: 384 rows ran at
  // 1269 GFLOP/s, 4096 at 997). And few enough that their outputs stay in
  // L2 until each row is whole: a chunk's y is written a panel group at a
  // time, 128 bytes of a row, and a bigger one went back to memory before its
  // rows' next groups came (Xeon, w8a8 4096 x 3072 x 768, 4096 rows of y a
  // chunk: 2.1 TOP/s on AMX, 0.76 on VNNI; 32 rows: 3.1 and 1.2). Chunks of
  // whole tiles: the same tiles.
  constexpr int64_t kChunkBytes = int64_t{256} << 10;
  constexpr int64_t kOutChunkBytes = int64_t{128} << 10;
  const int64_t step = std::lcm<int64_t>(kernels.max_rows, wide ? kernels.wide_rows : 1);
  const int64_t fit = std::min(kChunkBytes / a.ld, kOutChunkBytes / (w.n() * 4));
  const int64_t chunk = std::max(step, fit / step * step);
  // int8: the next chunk's codes come into L2 while this chunk computes (a
  // thread reads every row, half of them quantized on the other core). Zen 5,
  // w8a8 4096 x 768 x 768 +9%, x 3072 x 768 +3%; int4's kernels, slower per
  // code, lost 1-2% with it. The unsigned codes only where the tier reads
  // nothing else (AMX's tiles read the signed ones, its row tails both).
  const void* codes = nullptr;
  if (!int4) codes = reads == Int8Rows::kUnsigned ? static_cast<const void*>(a.q_u8) : a.q;
  auto run = [&](int64_t b, int64_t e, int) {
    if (kernels.enter != nullptr) kernels.enter();
    PanelTask t = base;
    for (int64_t c0 = 0; c0 < a.m; c0 += chunk) {
      const int64_t c1 = std::min(a.m, c0 + chunk);
      if (codes != nullptr) PrefetchRows(codes, c1 * a.ld, std::min(a.m, c1 + chunk) * a.ld);
      for (int64_t u = b; u < e; ++u) {
        const int64_t p0 = u * group, in_group = std::min(group, panels - p0);
        if (wide && in_group == group) {
          t.panels = static_cast<int>(group);
          t.panel_bytes = w.lines() * 64;
          t.columns = static_cast<int>(std::min<int64_t>(16, w.n() - (p0 + group - 1) * 16));
          for (int64_t r0 = c0; r0 < c1; r0 += kernels.wide_rows) {
            tile(t, p0, r0, std::min<int64_t>(kernels.wide_rows, c1 - r0));
            wide_kernel(t);
          }
          continue;
        }
        t.panels = 1;
        for (int64_t p = p0; p < p0 + in_group; ++p) {
          t.columns = static_cast<int>(std::min<int64_t>(16, w.n() - p * 16));
          for (int64_t r0 = c0; r0 < c1; r0 += kernels.max_rows) {
            tile(t, p, r0, std::min<int64_t>(kernels.max_rows, c1 - r0));
            (int4 ? kernels.int4 : kernels.int8)(t);
          }
        }
      }
    }
    if (kernels.leave != nullptr) kernels.leave();
  };
  if (a.m * a.k * w.n() < kMinMacsPerThread * 2 || ctx.threads() == 1) {
    run(0, units, 0);
  } else {
    ctx.pool().ParallelFor(units, run);
  }
}

}  // namespace anvil::kernels
