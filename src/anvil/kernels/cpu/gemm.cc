// GEMM entry points: argument checks, tier choice, and the static partition
// of C over threads (whole register tiles along M or N; never along K, so the
// partition cannot change any element's summation order).
#include "anvil/kernels/gemm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "anvil/core/check.h"
#include "anvil/core/convert.h"
#include "anvil/kernels/cpu/gemm_fp8.h"
#include "anvil/kernels/cpu/gemm_internal.h"
#include "anvil/profile/trace.h"

namespace anvil::kernels {
namespace {

using gemm_internal::Blocking;
using gemm_internal::Problem;
using gemm_internal::Region;

// Below this many multiply-adds one thread does the whole call: waking a
// parked worker costs more than it saves.
constexpr int64_t kMinMacsPerThread = int64_t{1} << 18;

// The tier that runs a call. AVX-512 bf16 inputs need vdpbf16ps; without
// AVX512_BF16 they take the AVX2 tier (bf16 widened to f32).
Isa TierFor(Isa isa, bool bf16_in) {
  if (isa == Isa::kAvx512 && bf16_in && !GetCpuFeatures().avx512_bf16) return Isa::kAvx2;
  return isa;
}

// Whether a call on `tier` runs on AMX tiles: bf16 inputs (FP8 decoded to
// bf16 too, its K blocks whole tiles of 32) of a context that uses them.
bool UsesAmx(const KernelCtx& ctx, Isa tier, bool bf16_in,
             const gemm_internal::Fp8Problem* fp8 = nullptr) {
  return ctx.amx() && tier == Isa::kAvx512 && bf16_in && (fp8 == nullptr || fp8->kblock % 32 == 0);
}

const Blocking& BlockingFor(Isa tier, bool bf16_in, bool amx = false) {
  if (amx) return gemm_internal::kAmxBf16;
  switch (tier) {
    case Isa::kAvx512: return bf16_in ? gemm_internal::kAvx512Bf16 : gemm_internal::kAvx512F32;
    case Isa::kAvx2: return gemm_internal::kAvx2;
    case Isa::kScalar: break;
  }
  return gemm_internal::kScalar;
}

void CheckArgs(const GemmArgs& g, const void* a, const void* b, const void* c) {
  CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0)
      << "Gemm: m, n, k must be >= 0, got " << g.m << ", " << g.n << ", " << g.k;
  const int64_t min_lda = g.trans_a == Trans::kN ? g.k : g.m;
  const int64_t min_ldb = g.trans_b == Trans::kN ? g.n : g.k;
  CHECK(g.lda == 0 || g.lda >= min_lda) << "Gemm: lda " << g.lda << " < " << min_lda;
  CHECK(g.ldb == 0 || g.ldb >= min_ldb) << "Gemm: ldb " << g.ldb << " < " << min_ldb;
  CHECK(g.ldc == 0 || g.ldc >= g.n) << "Gemm: ldc " << g.ldc << " < n = " << g.n;
  if (g.m > 0 && g.n > 0) {
    CHECK(c != nullptr) << "Gemm: c is null";
    if (g.k > 0) CHECK(a != nullptr && b != nullptr) << "Gemm: a or b is null";
  }
}

Problem Normalize(const GemmArgs& g, bool bf16_in, bool bf16_out, const void* a, const void* b,
                  void* c) {
  Problem p{};
  p.m = g.m;
  p.n = g.n;
  p.k = g.k;
  p.trans_a = g.trans_a == Trans::kT;
  p.trans_b = g.trans_b == Trans::kT;
  p.lda = g.lda != 0 ? g.lda : (p.trans_a ? g.m : g.k);
  p.ldb = g.ldb != 0 ? g.ldb : (p.trans_b ? g.k : g.n);
  p.ldc = g.ldc != 0 ? g.ldc : g.n;
  p.accumulate = g.accumulate;
  p.bf16_in = bf16_in;
  p.bf16_out = bf16_out;
  p.a = a;
  p.b = b;
  p.c = c;
  return p;
}

// Thread t's share of C: whole mr-row or nr-column units of the dimension
// whose split duplicates less packing (splitting M makes every thread pack all
// of B: K*N extra each; splitting N: K*M), unless that leaves threads idle.
Region Share(const Problem& p, const Blocking& bl, bool decode, int threads, int t) {
  const int64_t units_m = (p.m + bl.mr - 1) / bl.mr;
  const int64_t units_n = (p.n + bl.nr - 1) / bl.nr;
  bool split_n = decode || p.m < p.n;
  if (!decode && split_n && units_n < threads && units_m > units_n) split_n = false;
  if (!decode && !split_n && units_m < threads && units_n > units_m) split_n = true;
  if (split_n) {
    const auto [b, e] = ThreadPool::StaticRange(units_n, threads, t);
    return {0, p.m, std::min(p.n, b * bl.nr), std::min(p.n, e * bl.nr)};
  }
  const auto [b, e] = ThreadPool::StaticRange(units_m, threads, t);
  return {std::min(p.m, b * bl.mr), std::min(p.m, e * bl.mr), 0, p.n};
}

// C = 0 or unchanged when K == 0 (an empty sum).
void EmptySum(const Problem& p) {
  if (p.accumulate) return;
  const size_t elem = p.bf16_out ? 2 : 4;
  for (int64_t i = 0; i < p.m; ++i) {
    std::memset(static_cast<std::byte*>(p.c) + i * p.ldc * elem, 0, p.n * elem);
  }
}

void Run(const KernelCtx& ctx, const GemmArgs& args, bool bf16_in, bool bf16_out, const void* a,
         const void* b, void* c, const gemm_internal::Fp8Problem* fp8 = nullptr,
         const uint32_t* packed_b = nullptr) {
  ANVIL_TRACE_ZONE(fp8 != nullptr ? "gemm_fp8" : bf16_in ? "gemm_bf16" : "gemm_f32");
  CheckArgs(args, a, b, c);
  if (args.m == 0 || args.n == 0) return;
  Problem p = Normalize(args, bf16_in, bf16_out, a, b, c);
  p.fp8 = fp8;
  p.b_from_dram = ctx.weights_outgrow_caches();
  if (p.k == 0) return EmptySum(p);
  const Isa tier = TierFor(ctx.isa(), bf16_in);
  const bool amx = UsesAmx(ctx, tier, bf16_in, fp8);
  const Blocking& bl = BlockingFor(tier, bf16_in, amx);
  CHECK_GE(ctx.scratch_bytes(), gemm_internal::kMinScratchBytes)
      << "Gemm: the KernelCtx needs at least 1 MiB of scratch per thread";
  // B packed already: used unless one streaming pass over B would do (FP8:
  // over B's codes laid out for it, PackedFp8B's stream). AMX always reads
  // the panels: its stream pairs B's rows again in every call (tiny's bf16
  // decoding at batch 1: 1440 tokens/s streaming, 2850 from the panels).
  if (packed_b != nullptr &&
      (amx || !(gemm_internal::StreamsB(p, bl) && p.m <= gemm_internal::kDecodeChunkRows))) {
    p.packed_b = packed_b;
  }
  const bool decode = gemm_internal::StreamsB(p, bl);
  const int64_t macs = p.m * p.n * p.k;
  const int threads =
      static_cast<int>(std::clamp<int64_t>(macs / kMinMacsPerThread, 1, ctx.threads()));
  ctx.pool().RunOnAll([&](int t) {
    if (t >= threads) return;
    const Region r = Share(p, bl, decode, threads, t);
    if (r.m0 >= r.m1 || r.n0 >= r.n1) return;
    if (amx) return gemm_internal::GemmRegionAmx(p, r, ctx.scratch(t), ctx.scratch_bytes());
    switch (tier) {
      case Isa::kAvx512:
        gemm_internal::GemmRegionAvx512(p, r, ctx.scratch(t), ctx.scratch_bytes());
        break;
      case Isa::kAvx2:
        gemm_internal::GemmRegionAvx2(p, r, ctx.scratch(t), ctx.scratch_bytes());
        break;
      case Isa::kScalar:
        gemm_internal::GemmRegionScalar(p, r, ctx.scratch(t), ctx.scratch_bytes());
        break;
    }
  });
}

// Each format's 256 values and their bf16 bits (exact: 2 or 3 mantissa bits).
struct Fp8Tables {
  float value[256];
  uint16_t bf16[256];
};
const Fp8Tables& TablesFor(Fp8Format format) {
  static const auto make = [](Fp8Format f) {
    Fp8Tables t{};
    for (int q = 0; q < 256; ++q) {
      const auto code = static_cast<uint8_t>(q);
      t.value[q] = f == Fp8Format::kE4M3 ? E4M3ToF32(code) : E5M2ToF32(code);
      t.bf16[q] = F32ToBF16(t.value[q]);
    }
    return t;
  };
  static const Fp8Tables e4m3 = make(Fp8Format::kE4M3), e5m2 = make(Fp8Format::kE5M2);
  return format == Fp8Format::kE4M3 ? e4m3 : e5m2;
}

bool BlockScaled(const Fp8Operand& o) {
  return o.scaling == Fp8Scaling::kRowBlocks || o.scaling == Fp8Scaling::kTiles;
}

// `a_data`: A's codes and scales are there to check (not for a packed B's a_like).
void CheckFp8(const GemmArgs& g, const Fp8Operand& a, const Fp8Operand& b, bool a_data = true) {
  CHECK(g.trans_a == Trans::kN) << "GemmFp8: A must be stored [m, k] (quantize it along K)";
  for (const Fp8Operand* o : {&a, &b}) {
    const char* name = o == &a ? "A" : "B";
    if (o == &a && !a_data) continue;
    CHECK_GT(o->block, 0) << "GemmFp8: " << name << " block";
    if (o->scaling == Fp8Scaling::kRowBlocks || o->scaling == Fp8Scaling::kTiles) {
      CHECK(o->scales != nullptr) << "GemmFp8: " << name << " has no scales";
    }
    if (o->scaling == Fp8Scaling::kMx) CHECK(o->e8m0 != nullptr) << "GemmFp8: " << name << " has no E8M0 scales";
  }
  for (const Fp8Scaling s : {Fp8Scaling::kRowBlocks, Fp8Scaling::kMx}) {
    CHECK(b.scaling != s || g.trans_b == Trans::kT)
        << "GemmFp8: B with scales along K per column must be stored [n, k] (trans_b)";
  }
  CHECK(!(BlockScaled(a) && BlockScaled(b)) || a.block == b.block)
      << "GemmFp8: A's and B's scale blocks differ along K (" << a.block << " vs " << b.block << ")";
}

// The byte of column c (< kStreamPairCols), row half h, within a line of
// the AVX-512 stream layout (gemm_internal.h's Fp8StreamB): where the
// kernel's byte unpacks (gemm_avx512_fp8_decode.cc) take it from.
int64_t StreamBytePos(int64_t c, int64_t h) {
  return c < 16 ? 16 * (c / 4) + 2 * (c % 4) + h : 16 * ((c - 16) / 4) + 8 + 2 * (c % 4) + h;
}

// gemm_fp8.h's helpers for this (baseline) unit, on a tier type of its own:
// no symbol shared with the ISA units' instantiations.
struct BaselineTier {};
using Fp8Helpers = gemm_internal::Fp8Pack<BaselineTier>;

// GemmFp8's operands as the driver and packers see them, on `isa`.
gemm_internal::Fp8Problem Fp8ProblemOf(Isa isa, const Fp8Operand& a, const Fp8Operand& b,
                                       Fp8Decode decode,
                                       const gemm_internal::Fp8StreamB* stream_b = nullptr) {
  const bool as_bf16 = decode == Fp8Decode::kBf16;
  gemm_internal::Fp8Problem f{};
  f.a = a;
  f.b = b;
  f.value_a = TablesFor(a.format).value;
  f.value_b = TablesFor(b.format).value;
  f.bf16_a = TablesFor(a.format).bf16;
  f.bf16_b = TablesFor(b.format).bf16;
  f.kblock = GemmFp8KBlock(isa, a, b, decode);
  f.decode_bf16 = as_bf16;
  CHECK_LE(f.kblock, GemmKBlock(isa, as_bf16))
      << "GemmFp8: scale blocks longer than this tier's K block";
  f.block_scaled = a.scaling != Fp8Scaling::kMx || b.scaling != Fp8Scaling::kMx;
  f.stream_b = stream_b;
  return f;
}

void RunFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a, const Fp8Operand& b,
            bool bf16_out, void* c, Fp8Decode decode, const uint32_t* packed_b = nullptr,
            const gemm_internal::Fp8StreamB* stream_b = nullptr) {
  CheckFp8(args, a, b);
  const gemm_internal::Fp8Problem f = Fp8ProblemOf(ctx.isa(), a, b, decode, stream_b);
  Run(ctx, args, /*bf16_in=*/f.decode_bf16, bf16_out, a.data, b.data, c, &f, packed_b);
}

// B of `p` packed whole into `out` for `tier` (PackedBWords' layout), threads
// splitting it by columns.
void PackWholeB(const KernelCtx& ctx, const Problem& p, Isa tier, bool amx, const Blocking& bl,
                uint32_t* out) {
  ANVIL_TRACE_ZONE("gemm_pack_b");
  const int64_t units = (p.n + bl.nr - 1) / bl.nr;
  const int threads = static_cast<int>(std::clamp<int64_t>(
      p.k * p.n / kMinMacsPerThread, 1, std::min<int64_t>(ctx.threads(), units)));
  ctx.pool().RunOnAll([&](int t) {
    if (t >= threads) return;
    const auto [u0, u1] = ThreadPool::StaticRange(units, threads, t);
    const int64_t n0 = std::min(p.n, u0 * bl.nr), n1 = std::min(p.n, u1 * bl.nr);
    if (n0 >= n1) return;
    if (amx) {
      gemm_internal::PackWholeBAmx(p, n0, n1, out);
    } else if (tier == Isa::kAvx512) {
      gemm_internal::PackWholeBAvx512(p, n0, n1, out);
    } else {
      gemm_internal::PackWholeBAvx2(p, n0, n1, out);
    }
  });
}

}  // namespace

int64_t GemmFp8KBlock(Isa isa, const Fp8Operand& a, const Fp8Operand& b, Fp8Decode decode) {
  if (BlockScaled(a)) return a.block;
  if (BlockScaled(b)) return b.block;
  return GemmKBlock(isa, decode == Fp8Decode::kBf16);
}

void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a, const Fp8Operand& b,
             float* c, Fp8Decode decode) {
  RunFp8(ctx, args, a, b, false, c, decode);
}
void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a, const Fp8Operand& b,
             BF16* c, Fp8Decode decode) {
  RunFp8(ctx, args, a, b, true, c, decode);
}

void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const float* b, float* c) {
  Run(ctx, args, false, false, a, b, c);
}
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const float* b, BF16* c) {
  Run(ctx, args, false, true, a, b, c);
}
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const BF16* b, float* c) {
  Run(ctx, args, true, false, a, b, c);
}
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const BF16* b, BF16* c) {
  Run(ctx, args, true, true, a, b, c);
}

PackedB::PackedB(const KernelCtx& ctx, const GemmArgs& args, const float* b)
    : args_(args), b_(b) {
  args_.m = 0;
  CHECK(args.k > 0 && args.n > 0 && b != nullptr) << "PackedB: an empty or null B";
  Repack(ctx);
}

PackedB::PackedB(const KernelCtx& ctx, const GemmArgs& args, const BF16* b)
    : args_(args), b_(b), bf16_(true) {
  args_.m = 0;
  CHECK(args.k > 0 && args.n > 0 && b != nullptr) << "PackedB: an empty or null B";
  Repack(ctx);
}

void PackedB::Repack(const KernelCtx& ctx) {
  const Problem p = Normalize(args_, bf16_, false, nullptr, b_, nullptr);
  const Isa tier = TierFor(ctx.isa(), bf16_);
  const bool amx = UsesAmx(ctx, tier, bf16_);
  const Blocking& bl = BlockingFor(tier, bf16_, amx);
  // bf16 k-pairs where the tier has a bf16 dot product (AVX-512 after
  // TierFor, AMX's steps padded to whole tiles), f32 words elsewhere: the
  // layout the driver's kernel reads.
  const bool pairs = bf16_ && tier == Isa::kAvx512;
  if (tier != tier_ || amx != amx_ || (packed_.size() == 0 && tier != Isa::kScalar)) {
    tier_ = tier;
    amx_ = amx;
    packed_ = tier == Isa::kScalar
                  ? AlignedBuffer()
                  : AlignedBuffer(static_cast<size_t>(gemm_internal::PackedBWords(p, bl, bl.kc,
                                                                                   pairs)) *
                                  4);
  }
  if (packed_.size() == 0) return;  // the scalar tier reads B in place
  PackWholeB(ctx, p, tier_, amx_, bl, reinterpret_cast<uint32_t*>(packed_.data()));
}

void PackedB::Multiply(const KernelCtx& ctx, const GemmArgs& args, bool bf16_out, const void* a,
                       const PackedB& b, void* c) {
  const GemmArgs& packed = b.args_;
  const int64_t ldb = Normalize(args, b.bf16_, bf16_out, a, b.b_, c).ldb;
  CHECK(args.k == packed.k && args.n == packed.n && args.trans_b == packed.trans_b &&
        ldb == Normalize(packed, b.bf16_, false, nullptr, b.b_, nullptr).ldb)
      << "Gemm: B is not the packed one (k " << args.k << " vs " << packed.k << ", n " << args.n
      << " vs " << packed.n << ")";
  const Isa tier = TierFor(ctx.isa(), b.bf16_);
  CHECK(tier == b.tier_) << "Gemm: B was packed for another ISA tier";
  CHECK(UsesAmx(ctx, tier, b.bf16_) == b.amx_)
      << "Gemm: B was packed with AMX " << (b.amx_ ? "on" : "off") << ", the call has it "
      << (b.amx_ ? "off" : "on");
  const auto* words =
      b.packed_.size() != 0 ? reinterpret_cast<const uint32_t*>(b.packed_.data()) : nullptr;
  Run(ctx, args, b.bf16_, bf16_out, a, b.b_, c, nullptr, words);
}

void Gemm(const KernelCtx& ctx, const GemmArgs& args, const float* a, const PackedB& b, float* c) {
  CHECK(!b.bf16()) << "Gemm: an f32 A with a bf16 packed B";
  PackedB::Multiply(ctx, args, false, a, b, c);
}
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const PackedB& b, float* c) {
  CHECK(b.bf16()) << "Gemm: a bf16 A with an f32 packed B";
  PackedB::Multiply(ctx, args, false, a, b, c);
}
void Gemm(const KernelCtx& ctx, const GemmArgs& args, const BF16* a, const PackedB& b, BF16* c) {
  CHECK(b.bf16()) << "Gemm: a bf16 A with an f32 packed B";
  PackedB::Multiply(ctx, args, true, a, b, c);
}

void PackedFp8B::Pack(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a_like,
                      const Fp8Operand& b, Fp8Decode decode, Streaming streaming) {
  CHECK(args.k > 0 && args.n > 0 && b.data != nullptr) << "PackedFp8B: an empty or null B";
  args_ = {.n = args.n, .k = args.k, .trans_b = args.trans_b};
  CheckFp8(args_, a_like, b, /*a_data=*/false);
  a_like_ = a_like;
  a_like_.data = nullptr;
  b_ = b;
  decode_ = decode;
  // The copy, tight: B stored [n, k] (trans_b) or [k, n].
  const bool trans = args.trans_b == Trans::kT;
  const int64_t rows = trans ? args.n : args.k, cols = trans ? args.k : args.n;
  const int64_t ld = args.ldb != 0 ? args.ldb : cols;
  CHECK_GE(ld, cols) << "PackedFp8B: ldb " << ld << " < " << cols;
  codes_.resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(codes_.data() + r * cols, b.data + r * ld, static_cast<size_t>(cols));
  }
  b_.data = codes_.data();
  const int64_t k_blocks = (args.k + b.block - 1) / b.block;
  scales_.clear();
  e8m0_.clear();
  b_.scales = nullptr;  // set below where the scaling has them: nothing of the original kept
  b_.e8m0 = nullptr;
  switch (b.scaling) {
    case Fp8Scaling::kTensor:
      break;
    case Fp8Scaling::kTiles:
      scales_.assign(b.scales, b.scales + k_blocks * ((args.n + b.block - 1) / b.block));
      b_.scales = scales_.data();
      break;
    case Fp8Scaling::kRowBlocks:  // per column of B (stored [n, k]) and K block
      scales_.assign(b.scales, b.scales + args.n * k_blocks);
      b_.scales = scales_.data();
      break;
    case Fp8Scaling::kMx:
      e8m0_.assign(b.e8m0, b.e8m0 + args.n * k_blocks);
      b_.e8m0 = e8m0_.data();
      break;
  }
  // The decoded panels, for the tier the calls will run on.
  const gemm_internal::Fp8Problem f = Fp8ProblemOf(ctx.isa(), a_like_, b_, decode);
  tier_ = TierFor(ctx.isa(), f.decode_bf16);
  if (tier_ == Isa::kScalar) {  // reads the codes
    amx_ = false;
    packed_ = AlignedBuffer();
    LayOutStream(f, Streaming::kNever);  // none
    return;
  }
  Problem p = Normalize(args_, f.decode_bf16, false, nullptr, codes_.data(), nullptr);
  p.fp8 = &f;
  amx_ = UsesAmx(ctx, tier_, f.decode_bf16, &f);
  const Blocking& bl = BlockingFor(tier_, f.decode_bf16, amx_);
  // AVX-512 packs bf16 k-pairs for its vdpbf16ps kernel or AMX tiles (the
  // tiers' kFp8Pairs).
  const bool pairs = f.decode_bf16 && tier_ == Isa::kAvx512;
  const auto bytes =
      static_cast<size_t>(gemm_internal::PackedBWords(p, bl, f.kblock, pairs)) * 4;
  if (packed_.size() != bytes) packed_ = AlignedBuffer(bytes);
  PackWholeB(ctx, p, tier_, amx_, bl, reinterpret_cast<uint32_t*>(packed_.data()));
  // AMX has no streaming path: its calls all read the panels.
  LayOutStream(f, amx_ ? Streaming::kNever : streaming);
  // The calls read the panels or the stream, never the codes: B's data only
  // has to be non-null for the argument checks.
  codes_ = std::vector<uint8_t>();
  b_.data = reinterpret_cast<const uint8_t*>(packed_.data());
}

void PackedFp8B::LayOutStream(const gemm_internal::Fp8Problem& f, Streaming streaming) {
  using gemm_internal::Fp8StreamB;
  stream_codes_ = AlignedBuffer();
  stream_words_.clear();
  stream_e8m0_.clear();
  stream_factors_ = AlignedBuffer();
  const int64_t n = args_.n, k = args_.k;
  const bool mx = b_.scaling == Fp8Scaling::kMx;
  // The streaming paths' conditions (gemm_avx512_fp8_decode.cc,
  // gemm_avx2_fp8_decode.cc): panels past the L2 caches; on AVX-512, byte
  // permutes and K blocks (and MX blocks) of whole k-pairs; A's rows and
  // factors within the least scratch.
  const auto panel_bytes = static_cast<int64_t>(packed_.size());
  const bool small = panel_bytes <= gemm_internal::kFp8StreamMinPanelBytes;
  const bool pairs = tier_ == Isa::kAvx512;
  stream_max_rows_ = streaming == Streaming::kAlways ||
                             panel_bytes > gemm_internal::kFp8StreamManyRowsMinPanelBytes
                         ? gemm_internal::kDecodeChunkRows
                         : gemm_internal::kFp8StreamFewRows;
  if (streaming == Streaming::kNever || (streaming == Streaming::kAuto && small) ||
      (pairs && (!GetCpuFeatures().avx512_vbmi || f.kblock % 2 != 0 ||
                 (mx && b_.block % 2 != 0))) ||
      f.kblock < gemm_internal::kFp8StreamMinBlock || k > gemm_internal::kFp8StreamMaxK) {
    return;
  }
  // The decodes are exact for every code but NaN (AVX-512: a code's word is
  // its value's bf16 bits, or the high half of its f32 bits, whose low half
  // is zero but for NaN's, and a negative code's word is its magnitude's with
  // the sign bit; AVX2 goes through f16). A B with a NaN code (a weight gone
  // bad) is left to the panels.
  bool nan[256];
  for (int q = 0; q < 256; ++q) nan[q] = std::isnan(f.value_b[q]);
  for (const uint8_t q : codes_) {
    if (nan[q]) return;
  }
  if (pairs) {
    stream_words_.resize(256);
    for (int q = 0; q < 256; ++q) {
      const uint32_t bits = std::bit_cast<uint32_t>(f.value_b[q]);
      stream_words_[q] = f.decode_bf16 ? f.bf16_b[q] : static_cast<uint16_t>(bits >> 16);
      CHECK(nan[q] || (bits & 0xFFFFu) == 0) << "an FP8 value with more than bf16's mantissa";
    }
    for (int q = 128; q < 256; ++q) {
      CHECK(nan[q] || stream_words_[q] == (stream_words_[q - 128] | 0x8000u))
          << "an FP8 format whose negative codes are not their magnitudes' with the sign bit";
    }
  }
  const int64_t kStrip = pairs ? Fp8StreamB::kStreamPairCols : Fp8StreamB::kStreamRowCols;
  const int64_t strips = (n + kStrip - 1) / kStrip, n_pad = strips * kStrip;
  const int64_t lines = pairs ? (k + 1) / 2 : k, line_bytes = pairs ? 64 : kStrip;
  stream_codes_ = AlignedBuffer(static_cast<size_t>(strips * lines * line_bytes));
  auto* out = reinterpret_cast<uint8_t*>(stream_codes_.data());
  std::memset(out, 0, stream_codes_.size());
  const bool trans = args_.trans_b == Trans::kT;  // the copy: [n, k], else [k, n]
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* strip = out + (j / kStrip) * lines * line_bytes;
    const int64_t c = j % kStrip;
    for (int64_t kk = 0; kk < k; ++kk) {
      const int64_t pos = pairs ? (kk / 2) * 64 + StreamBytePos(c, kk % 2)
                                : kk * kStrip + c;
      strip[pos] = trans ? codes_[j * k + kk] : codes_[kk * n + j];
    }
  }
  // Column j's entry for a block kb, strip-major.
  auto at = [&](int64_t j, int64_t kb, int64_t blocks) {
    return ((j / kStrip) * blocks + kb) * kStrip + j % kStrip;
  };
  if (mx) {  // stored [n, k / block] (trans_b)
    const int64_t blocks = (k + b_.block - 1) / b_.block;
    // Columns past n: factor 1 (127), which keeps the last strip on the
    // AVX-512 stream's exponent shift; their codes are 0, never stored.
    stream_e8m0_.assign(blocks * n_pad, 127);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t kb = 0; kb < blocks; ++kb) {
        stream_e8m0_[at(j, kb, blocks)] = e8m0_[j * blocks + kb];
      }
    }
  }
  if (f.block_scaled) {
    const int64_t blocks = (k + f.kblock - 1) / f.kblock;
    stream_factors_ = AlignedBuffer(static_cast<size_t>(blocks * n_pad) * sizeof(float));
    auto* factors = reinterpret_cast<float*>(stream_factors_.data());
    std::fill(factors, factors + blocks * n_pad, 0.0f);
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kb = 0; kb < blocks; ++kb)
        factors[at(j, kb, blocks)] = Fp8Helpers::Factor(b_, !trans, j, kb, n, k);
  }
}

int64_t PackedFp8B::bytes() const {
  return static_cast<int64_t>(codes_.size() + scales_.size() * sizeof(float) + e8m0_.size() +
                              packed_.size() + stream_codes_.size() + stream_e8m0_.size() +
                              stream_words_.size() * 2 + stream_factors_.size());
}

bool PackedFp8B::Streams(int64_t m) const {
  return stream_codes_.size() != 0 && m <= stream_max_rows_;
}

void GemmFp8(const KernelCtx& ctx, const GemmArgs& args, const Fp8Operand& a, const PackedFp8B& b,
             float* c) {
  const GemmArgs& packed = b.args_;
  CHECK(args.k == packed.k && args.n == packed.n && args.trans_b == packed.trans_b)
      << "GemmFp8: B is not the packed one (k " << args.k << " vs " << packed.k << ", n " << args.n
      << " vs " << packed.n << ")";
  CHECK(a.scaling == b.a_like_.scaling && a.block == b.a_like_.block)
      << "GemmFp8: A is scaled unlike the A the packed B was packed for";
  CHECK(TierFor(ctx.isa(), b.decode_ == Fp8Decode::kBf16) == b.tier_)
      << "GemmFp8: B was packed for another ISA tier";
  const gemm_internal::Fp8Problem f = Fp8ProblemOf(ctx.isa(), a, b.b_, b.decode_);
  CHECK(UsesAmx(ctx, b.tier_, f.decode_bf16, &f) == b.amx_)
      << "GemmFp8: B was packed with AMX " << (b.amx_ ? "on" : "off") << ", the call has it "
      << (b.amx_ ? "off" : "on");
  GemmArgs g = args;
  g.ldb = 0;  // the copy's
  const auto* words =
      b.packed_.size() != 0 ? reinterpret_cast<const uint32_t*>(b.packed_.data()) : nullptr;
  gemm_internal::Fp8StreamB stream{};
  if (b.stream_codes_.size() != 0) {
    stream.codes = reinterpret_cast<const uint8_t*>(b.stream_codes_.data());
    stream.strip_cols = b.tier_ == Isa::kAvx512 ? gemm_internal::Fp8StreamB::kStreamPairCols
                                                : gemm_internal::Fp8StreamB::kStreamRowCols;
    stream.max_rows = b.stream_max_rows_;
    stream.words = b.stream_words_.data();
    stream.e8m0 = b.stream_e8m0_.data();
    stream.factors = reinterpret_cast<const float*>(b.stream_factors_.data());
  }
  RunFp8(ctx, g, a, b.b_, false, c, b.decode_, words,
         stream.codes != nullptr ? &stream : nullptr);
}

int GemmKBlock(Isa isa, bool bf16_inputs) {
  return BlockingFor(TierFor(isa, bf16_inputs), bf16_inputs).kc;
}

namespace gemm_internal {

bool StreamsB(const Problem& p, const Blocking& bl) {
  if (p.fp8 != nullptr) {  // only from B laid out for it (PackedFp8B), one pass of rows
    return p.fp8->stream_b != nullptr && p.packed_b == nullptr && !p.bf16_out &&
           bl.decode_max_m > 0 && p.m <= p.fp8->stream_b->max_rows;
  }
  if (p.packed_b != nullptr || p.trans_b || bl.decode_max_m == 0 ||
      p.m > bl.decode_max_m) {
    return false;
  }
  return p.m <= kDecodeChunkRows || p.k * p.n * (p.bf16_in ? 2 : 4) <= kChunkedDecodeMaxBBytes;
}

int64_t PackedBWords(const Problem& p, const Blocking& bl, int64_t kblock, bool pairs) {
  const auto steps = [&](int64_t kc) {
    const int64_t s = pairs ? (kc + 1) / 2 : kc;
    return (s + bl.step_align - 1) / bl.step_align * bl.step_align;
  };
  return (p.k / kblock * steps(kblock) + steps(p.k % kblock)) * ((p.n + bl.nr - 1) / bl.nr * bl.nr);
}

Problem RowSlice(const Problem& p, int64_t first, int64_t rows) {
  const int64_t in = p.bf16_in ? 2 : 4, out = p.bf16_out ? 2 : 4;
  Problem q = p;
  q.m = rows;
  q.a = static_cast<const std::byte*>(p.a) + (p.trans_a ? first : first * p.lda) * in;
  q.c = static_cast<std::byte*>(p.c) + first * p.ldc * out;
  return q;
}

}  // namespace gemm_internal
}  // namespace anvil::kernels
