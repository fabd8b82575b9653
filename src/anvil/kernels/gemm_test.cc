// GEMM: every tier this CPU runs against the double oracle (all transposes,
// f32/bf16 in and out, accumulate, padded leading dimensions, edge shapes),
// and the bitwise contracts: batch invariance over M, thread count and
// scratch size; the streaming small-M path equal to the packed path;
// repeatability. Tolerances are derived in ExpectClose.
#include "anvil/kernels/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ref/gemm_ref.h"
#include "anvil/kernels/rowwise_testing.h"

namespace anvil::kernels {
namespace {

// The sanitizer build (about 10x slower) checks batch invariance against
// 1024 rows instead of 4096.
#ifdef ANVIL_SANITIZED
constexpr int64_t kBigM = 1024;
#else
constexpr int64_t kBigM = 4096;
#endif

using Tier = testing::GemmTier;
using testing::GemmTiers;

KernelCtx Ctx(ThreadPool& pool, const Tier& tier,
              size_t scratch = KernelCtx::kDefaultScratchBytes) {
  return KernelCtx(pool, tier.isa, scratch, tier.amx);
}

std::string Name(const GemmArgs& g, const Tier& tier, const char* dtypes) {
  return tier.Name() + " " + dtypes + " " + (g.trans_a == Trans::kT ? "T" : "N") +
         (g.trans_b == Trans::kT ? "T" : "N") + " m=" + std::to_string(g.m) +
         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         (g.accumulate ? " accumulate" : "");
}

// Uniform values in [-1, 1) with 24 random bits (splitmix64: cheap enough for
// the sanitizer build): no subnormals, so vdpbf16ps's flush-to-zero of
// subnormal inputs and results never applies.
std::vector<float> Random(size_t n, uint32_t step) {
  uint64_t state = 0x9E3779B97F4A7C15ull * (step + 1);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    v[i] = static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;
  }
  return v;
}
std::vector<BF16> ToBF16(const std::vector<float>& v) {
  std::vector<BF16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = anvil::ToBF16(v[i]);
  return out;
}

double Value(float x) { return x; }
double Value(BF16 x) { return ToFloat(x); }

// Stored extents of op(A), op(B) and C under g's layout (ld's filled in).
size_t SizeA(const GemmArgs& g) { return (g.trans_a == Trans::kN ? g.m : g.k) * g.lda; }
size_t SizeB(const GemmArgs& g) { return (g.trans_b == Trans::kN ? g.k : g.n) * g.ldb; }
size_t SizeC(const GemmArgs& g) { return g.m * g.ldc; }

// Every path rounds each product into its sum at most once (FMA; bf16
// products are exact in f32) and each partial once per later operation: a
// term meets at most min(K, kc) roundings inside its K block (vdpbf16ps may
// round twice per k-pair: still <= kc per block), one per later block sum
// and one for C's old value, so n = min(K, kc) + ceil(K / kc) + 1 and
//   |c - ref| <= γ_n · (|C_old| + Σ_k |a_ik||b_kj|),  γ_n = n·u / (1 - n·u),
// u = 2^-24 (Higham, Accuracy and Stability, §3.1). A bf16 C adds the final
// round to nearest even, at most 2^-8 of |c|.
template <typename TC>
void ExpectClose(const GemmArgs& g, Isa isa, bool bf16_in, const TC* c, const double* ref,
                 const double* mag, const std::string& what) {
  const int64_t kc = GemmKBlock(isa, bf16_in);
  const double n = std::min(g.k, kc) + (g.k + kc - 1) / kc + 1;
  const double u = std::ldexp(1.0, -24);
  const double gamma = n * u / (1 - n * u);
  int failures = 0;
  for (int64_t i = 0; i < g.m; ++i) {
    for (int64_t j = 0; j < g.n; ++j) {
      const double want = ref[i * g.n + j];
      double bound = gamma * mag[i * g.n + j];
      if (sizeof(TC) == 2) bound += std::ldexp(std::fabs(want) + bound, -8);
      const double got = Value(c[i * g.ldc + j]);
      if (!(std::fabs(got - want) <= bound) && failures++ < 3) {
        ADD_FAILURE() << what << ": C[" << i << "," << j << "] = " << got << ", want " << want
                      << " +- " << bound;
      }
    }
  }
  EXPECT_EQ(failures, 0) << what;
}

// The reference of one problem without C's old value, computed once and
// shared by every tier, output type and the accumulate variant.
struct Reference {
  std::vector<double> sum, magnitude;
  template <typename T>
  Reference(GemmArgs g, const std::vector<T>& a, const std::vector<T>& b)
      : sum(g.m * g.n), magnitude(g.m * g.n) {
    g.accumulate = false;
    const float* no_c = nullptr;
    ref::GemmRef(g, a.data(), b.data(), no_c, sum.data(), magnitude.data());
  }
};

// Runs one call and checks it against the reference; C's padding columns
// (ldc > n) must come back untouched.
template <typename T, typename TC>
void CheckOne(const KernelCtx& ctx, const GemmArgs& g, const std::vector<T>& a,
              const std::vector<T>& b, const std::vector<TC>& c_old, const Reference& r,
              const char* dtypes) {
  std::vector<double> ref = r.sum, mag = r.magnitude;
  if (g.accumulate) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        ref[i * g.n + j] += Value(c_old[i * g.ldc + j]);
        mag[i * g.n + j] += std::fabs(Value(c_old[i * g.ldc + j]));
      }
    }
  }
  std::vector<TC> c = c_old;
  Gemm(ctx, g, a.data(), b.data(), c.data());
  const std::string what = Name(g, Tier{ctx.isa(), ctx.amx()}, dtypes);
  ExpectClose(g, ctx.isa(), sizeof(T) == 2, c.data(), ref.data(), mag.data(), what);
  for (int64_t i = 0; i < g.m; ++i) {
    EXPECT_EQ(std::memcmp(&c[i * g.ldc + g.n], &c_old[i * g.ldc + g.n], (g.ldc - g.n) * sizeof(TC)), 0)
        << what << ": padding of row " << i << " was written";
  }
}

struct Shape {
  int64_t m, n, k;
};

// Sizes from {1, 2, 3, 7, 17, 31, 33, 65, 129, 300} and around the blocks
// (tiles 14x32 and 6x16; K blocks 256 (AVX2, scalar), 1024 and 2048 (AVX-512
// f32, bf16); the small-M limit 8).
const Shape kEdgeShapes[] = {
    {1, 1, 1},     {1, 7, 3},     {2, 3, 17},    {3, 33, 2},     {7, 17, 31},
    {17, 31, 65},  {31, 65, 7},   {33, 2, 129},  {65, 129, 33},  {129, 65, 300},
    {300, 17, 129}, {1, 300, 65}, {8, 129, 300}, {9, 33, 300},   {14, 32, 256},
    {15, 33, 257}, {28, 64, 512}, {1, 129, 513}, {4, 40, 1031},  {20, 50, 1030},
    {5, 37, 2053}, {16, 33, 2049},
};

TEST(GemmRef, SmallKnownValues) {
  // op(A) = [[1, 2], [3, 4]], op(B) = [[5, 6], [7, 8]] -> [[19, 22], [43, 50]].
  const float a_n[] = {1, 2, 3, 4}, a_t[] = {1, 3, 2, 4};
  const float b_n[] = {5, 6, 7, 8}, b_t[] = {5, 7, 6, 8};
  const float c_old[] = {1, 1, 1, 1};
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      GemmArgs g{.m = 2, .n = 2, .k = 2};
      g.trans_a = ta ? Trans::kT : Trans::kN;
      g.trans_b = tb ? Trans::kT : Trans::kN;
      g.accumulate = true;
      double out[4], mag[4];
      ref::GemmRef(g, ta ? a_t : a_n, tb ? b_t : b_n, c_old, out, mag);
      EXPECT_EQ(out[0], 20);
      EXPECT_EQ(out[1], 23);
      EXPECT_EQ(out[2], 44);
      EXPECT_EQ(out[3], 51);
      EXPECT_EQ(mag[3], 51);
    }
  }
}

TEST(Gemm, MatchesReferenceOnEdgeShapes) {
  ThreadPool pool(2);
  uint32_t seed = 0;
  for (const Shape& s : kEdgeShapes) {
    for (int trans = 0; trans < 4; ++trans) {
      GemmArgs g{.m = s.m, .n = s.n, .k = s.k};
      g.trans_a = trans & 1 ? Trans::kT : Trans::kN;
      g.trans_b = trans & 2 ? Trans::kT : Trans::kN;
      // Leading dimensions beyond the minimum, different per operand.
      g.lda = (g.trans_a == Trans::kN ? s.k : s.m) + 3;
      g.ldb = (g.trans_b == Trans::kN ? s.n : s.k) + 5;
      g.ldc = s.n + 2;
      const std::vector<float> a = Random(SizeA(g), ++seed), b = Random(SizeB(g), ++seed);
      const std::vector<float> c_old = Random(SizeC(g), ++seed);
      const std::vector<BF16> a16 = ToBF16(a), b16 = ToBF16(b), c_old16 = ToBF16(c_old);
      const Reference ref32(g, a, b), ref16(g, a16, b16);
      for (const Tier& tier : GemmTiers()) {
        const KernelCtx ctx = Ctx(pool, tier);
        for (bool accumulate : {false, true}) {
          g.accumulate = accumulate;
          CheckOne(ctx, g, a, b, c_old, ref32, "f32->f32");
          CheckOne(ctx, g, a, b, c_old16, ref32, "f32->bf16");
          CheckOne(ctx, g, a16, b16, c_old, ref16, "bf16->f32");
          CheckOne(ctx, g, a16, b16, c_old16, ref16, "bf16->bf16");
        }
      }
    }
  }
}

// ---- bitwise contracts ---------------------------------------------------------

// A fixed problem of up to max_m rows; Rows(m) computes its first m rows.
// op(A) rows are a prefix in both layouts: kT stores A as [k, max_m] and a
// call with fewer rows keeps lda = max_m.
template <typename T, typename TC>
struct Problem {
  GemmArgs g;
  std::vector<T> a, b;
  std::vector<TC> c_old;

  Problem(int64_t max_m, int64_t n, int64_t k, Trans ta, Trans tb, bool accumulate, uint32_t seed) {
    g = GemmArgs{.m = max_m, .n = n, .k = k, .trans_a = ta, .trans_b = tb};
    g.lda = ta == Trans::kN ? k + 1 : max_m;
    g.ldb = tb == Trans::kN ? n + 7 : k + 3;
    g.ldc = n + 1;
    g.accumulate = accumulate;
    a = Convert<T>(Random(SizeA(g), seed));
    b = Convert<T>(Random(SizeB(g), seed + 1));
    c_old = Convert<TC>(Random(SizeC(g), seed + 2));
  }
  template <typename U>
  static std::vector<U> Convert(const std::vector<float>& v) {
    if constexpr (sizeof(U) == 2) {
      return ToBF16(v);
    } else {
      return v;
    }
  }
  std::vector<TC> Rows(const KernelCtx& ctx, int64_t m) const {
    GemmArgs call = g;
    call.m = m;
    std::vector<TC> c(c_old.begin(), c_old.begin() + m * g.ldc);
    Gemm(ctx, call, a.data(), b.data(), c.data());
    return c;
  }
};

// The first rows of `small` equal those of `big`, bit for bit.
template <typename TC>
void ExpectSameRows(const std::vector<TC>& small, const std::vector<TC>& big,
                    const std::string& what) {
  ASSERT_LE(small.size(), big.size());
  for (size_t i = 0; i < small.size(); ++i) {
    uint32_t x = 0, y = 0;
    std::memcpy(&x, &small[i], sizeof(TC));
    std::memcpy(&y, &big[i], sizeof(TC));
    if (x != y) {
      ADD_FAILURE() << what << ": element " << i << " differs: " << Value(small[i]) << " vs "
                    << Value(big[i]);
      return;
    }
  }
}

// Rows of C computed with M = 1, 7, 64 and max_m, on 1 and 2 threads, twice,
// on every tier. The scalar tier computes each row on its own: max_m / 8 rows
// keep it fast under the sanitizer build.
template <typename T, typename TC>
void CheckBatchInvariance(int64_t max_m, int64_t n, int64_t k, const char* dtypes,
                          bool accumulate) {
  ThreadPool pool1(1), pool2(2);
  for (int trans = 0; trans < 4; ++trans) {
    const Problem<T, TC> p(max_m, n, k, trans & 1 ? Trans::kT : Trans::kN,
                           trans & 2 ? Trans::kT : Trans::kN, accumulate, 77 + trans);
    for (const Tier& tier : GemmTiers()) {
      const KernelCtx ctx1 = Ctx(pool1, tier), ctx2 = Ctx(pool2, tier);
      const int64_t rows = tier.isa == Isa::kScalar ? std::max<int64_t>(64, max_m / 8) : max_m;
      const std::string what = Name(p.g, tier, dtypes) + " rows=" + std::to_string(rows);
      const std::vector<TC> big = p.Rows(ctx2, rows);
      ExpectSameRows(p.Rows(ctx2, rows), big, what + " (repeated)");
      ExpectSameRows(p.Rows(ctx1, rows), big, what + " (1 thread)");
      for (int64_t m : {1, 7, 64}) {
        ExpectSameRows(p.Rows(ctx1, m), big, what + " M=" + std::to_string(m) + " 1 thread");
        ExpectSameRows(p.Rows(ctx2, m), big, what + " M=" + std::to_string(m) + " 2 threads");
      }
    }
  }
}

TEST(Gemm, BatchInvariantOverRowsThreadsAndRepeats) {
  // K = 2053 crosses every tier's K blocks (AVX-512 f32: 1024, bf16: 2048
  // with a tail pair; AVX2/scalar: 256) and so uses fewer rows.
  for (const Shape& s : {Shape{kBigM, 96, 300}, Shape{kBigM / 16, 53, 2053}}) {
    CheckBatchInvariance<float, float>(s.m, s.n, s.k, "f32->f32", false);
    CheckBatchInvariance<float, float>(s.m, s.n, s.k, "f32->f32", true);
    CheckBatchInvariance<float, BF16>(s.m, s.n, s.k, "f32->bf16", false);
    CheckBatchInvariance<BF16, float>(s.m, s.n, s.k, "bf16->f32", false);
    CheckBatchInvariance<BF16, BF16>(s.m, s.n, s.k, "bf16->bf16", false);
    CheckBatchInvariance<BF16, BF16>(s.m, s.n, s.k, "bf16->bf16", true);
  }
}

// Small M with B = [k, n] streams B unpacked (M <= 8 in one pass, more in
// chunks while B is small; with prefetches where B is large or the context
// says weights outgrow the caches) or, up to 64 rows, reads an f32 B in place; its
// rows must equal the packed path's (M = 80) bit for bit, including K tails
// (odd K: a half bf16 pair).
template <typename T, typename TC>
void CheckStreamingEqualsPacked(const char* dtypes) {
  ThreadPool pool(2);
  // K = 8191 and 8193: four K blocks, and one past AMX's streaming limit.
  // N = 2041 (ldb 2048): B's rows 4 or 8 KiB apart, which AVX2 streams from
  // DRAM in half groups.
  for (const Shape& s :
       {Shape{0, 200, 1100}, Shape{0, 37, 33}, Shape{0, 768, 513}, Shape{0, 200, 2100},
        Shape{0, 40, 8191}, Shape{0, 40, 8193}, Shape{0, 2041, 300}}) {
    for (Trans ta : {Trans::kN, Trans::kT}) {
      for (bool accumulate : {false, true}) {
        // 80 rows: past the 64 that read an f32 B in place, so B is packed.
        const Problem<T, TC> p(80, s.n, s.k, ta, Trans::kN, accumulate, 500);
        for (const Tier& tier : GemmTiers()) {
          const KernelCtx ctx = Ctx(pool, tier);
          const std::vector<TC> packed = p.Rows(ctx, 80);
          for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 32, 64}) {
            ExpectSameRows(p.Rows(ctx, m), packed,
                           Name(p.g, tier, dtypes) + " M=" + std::to_string(m));
          }
          // A model's weights that outgrow the caches: the DRAM-streaming
          // sweep order whatever B's size.
          KernelCtx dram = Ctx(pool, tier);
          dram.set_weights_outgrow_caches(true);
          for (int64_t m : {1, 4, 5, 6, 7, 8, 12}) {
            ExpectSameRows(p.Rows(dram, m), packed,
                           Name(p.g, tier, dtypes) + " from DRAM, M=" + std::to_string(m));
          }
        }
      }
    }
  }
  // Larger B: on AVX2 (AVX-512 past 8 MiB) B over 12 MiB takes the
  // DRAM-streaming sweep order (row groups, prefetch); one row (each
  // thread's part of B past its L2) takes the L3 walk up to 32 MiB, its f32
  // row groups longer below 16 MiB.
  for (const int64_t n : {1100, 2520}) {
    for (Trans ta : {Trans::kN, Trans::kT}) {
      const Problem<T, TC> big(80, n, n, ta, Trans::kN, true, 501);
      for (const Tier& tier : GemmTiers()) {
        if (tier.isa == Isa::kScalar) continue;  // one path only
        const KernelCtx ctx = Ctx(pool, tier);
        const std::vector<TC> packed = big.Rows(ctx, 80);
        for (int64_t m : {1, 3, 8}) {
          ExpectSameRows(big.Rows(ctx, m), packed,
                         Name(big.g, tier, dtypes) + " M=" + std::to_string(m));
        }
      }
    }
  }
}

TEST(Gemm, SmallMStreamingEqualsPacked) {
  CheckStreamingEqualsPacked<float, float>("f32->f32");
  CheckStreamingEqualsPacked<float, BF16>("f32->bf16");
  CheckStreamingEqualsPacked<BF16, float>("bf16->f32");
  CheckStreamingEqualsPacked<BF16, BF16>("bf16->bf16");
}

// B packed once (PackedB) gives Gemm's bits for every M (the small ones stream
// the original), both B layouts, K tails across the tiers' blocks, with and
// without accumulation; Repack follows a change of B's values. f32, and bf16
// with f32 and bf16 C.
template <typename T, typename TC>
void CheckPackedBEqualsGemm(const char* what) {
  ThreadPool pool(2);
  for (const Shape& s : {Shape{0, 200, 1100}, Shape{0, 37, 33}, Shape{0, 70, 2100}}) {
    for (Trans tb : {Trans::kN, Trans::kT}) {
      for (bool accumulate : {false, true}) {
        Problem<T, TC> p(100, s.n, s.k, Trans::kN, tb, accumulate, 700);
        for (const Tier& tier : GemmTiers()) {
          const KernelCtx ctx = Ctx(pool, tier);
          PackedB packed(ctx, p.g, p.b.data());
          for (int64_t m : {1, 5, 8, 9, 14, 32, 100}) {
            GemmArgs call = p.g;
            call.m = m;
            std::vector<TC> c(p.c_old.begin(), p.c_old.begin() + m * p.g.ldc);
            Gemm(ctx, call, p.a.data(), packed, c.data());
            ExpectSameRows(c, p.Rows(ctx, m),
                           Name(call, tier, (std::string(what) + " packed B").c_str()));
          }
          // New values (each tier its own) in place: the copy follows the original's address.
          const std::vector<T> fresh = Problem<T, TC>::template Convert<T>(
              Random(SizeB(p.g), 901 + 10 * static_cast<uint32_t>(tier.isa) + tier.amx));
          std::copy(fresh.begin(), fresh.end(), p.b.begin());
          packed.Repack(ctx);
          std::vector<TC> c(p.c_old.begin(), p.c_old.begin() + 32 * p.g.ldc);
          GemmArgs call = p.g;
          call.m = 32;
          Gemm(ctx, call, p.a.data(), packed, c.data());
          ExpectSameRows(c, p.Rows(ctx, 32),
                         Name(call, tier, (std::string(what) + " repacked B").c_str()));
        }
      }
    }
  }
}

TEST(Gemm, PackedBEqualsGemm) {
  CheckPackedBEqualsGemm<float, float>("f32");
  CheckPackedBEqualsGemm<BF16, float>("bf16->f32");
  CheckPackedBEqualsGemm<BF16, BF16>("bf16->bf16");
}

// Less scratch shrinks the column block and splits a bf16 C's f32 partials
// into row chunks: neither may change a bit.
TEST(Gemm, ScratchSizeDoesNotChangeResults) {
  ThreadPool pool(2);
  for (const Tier& tier : GemmTiers()) {
    if (tier.isa == Isa::kScalar) continue;  // uses no scratch
    const KernelCtx big = Ctx(pool, tier), small = Ctx(pool, tier, size_t{1} << 20);
    for (int trans = 0; trans < 4; ++trans) {
      const Trans ta = trans & 1 ? Trans::kT : Trans::kN, tb = trans & 2 ? Trans::kT : Trans::kN;
      // K = 2100 crosses every tier's K block.
      const Problem<BF16, BF16> p16(1000, 300, 2100, ta, tb, true, 900);
      ExpectSameRows(p16.Rows(small, 1000), p16.Rows(big, 1000), Name(p16.g, tier, "bf16->bf16"));
      const Problem<float, float> p32(300, 1100, 1100, ta, tb, false, 901);
      ExpectSameRows(p32.Rows(small, 300), p32.Rows(big, 300), Name(p32.g, tier, "f32->f32"));
    }
  }
}

// On a CPU with AMX, a context that uses it runs bf16 on AMX tiles on every
// path: streamed B (up to 16 rows of a B [k, n]), a tile's first 16 rows, whole
// tiles, and a packed B; tdpbf16ps rounds otherwise than vdpbf16ps, so over
// a long K the two contexts' bits part (the tests above hold each to the
// reference and to batch invariance). A B packed under one is refused under
// the other.
TEST(Gemm, AmxContextsRunBf16OnTiles) {
  if (!IsaSupported(Isa::kAvx512) || !AmxEnabled()) GTEST_SKIP() << "no AMX-BF16 here";
  ThreadPool pool(2);
  const KernelCtx amx = Ctx(pool, {Isa::kAvx512, true}), dot = Ctx(pool, {Isa::kAvx512, false});
  ASSERT_TRUE(amx.amx());
  ASSERT_FALSE(dot.amx());
  const auto differ = [](const std::vector<float>& x, const std::vector<float>& y) {
    return std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0;
  };
  for (const int64_t m : {1, 8, 20, 64}) {
    for (const Trans tb : {Trans::kN, Trans::kT}) {
      const Problem<BF16, float> p(m, 96, 1024, Trans::kN, tb, false, 31);
      const std::string what = Name(p.g, {Isa::kAvx512, true}, "bf16->f32");
      EXPECT_TRUE(differ(p.Rows(amx, m), p.Rows(dot, m))) << what;
      const PackedB on(amx, p.g, p.b.data()), off(dot, p.g, p.b.data());
      std::vector<float> c_on(p.c_old), c_off(p.c_old);
      Gemm(amx, p.g, p.a.data(), on, c_on.data());
      Gemm(dot, p.g, p.a.data(), off, c_off.data());
      EXPECT_TRUE(differ(c_on, c_off)) << what << " packed B";
      EXPECT_DEATH(Gemm(dot, p.g, p.a.data(), on, c_off.data()), "packed with AMX on");
    }
  }
}

TEST(Gemm, EmptyDimensions) {
  ThreadPool pool(2);
  const KernelCtx ctx(pool);
  std::vector<float> c = {1, 2, 3, 4, 5, 6};
  const float a[1] = {7}, b[1] = {8};
  GemmArgs g{.m = 2, .n = 3, .k = 0};
  g.accumulate = true;
  Gemm(ctx, g, a, b, c.data());  // empty sum added: unchanged
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  g.accumulate = false;
  Gemm(ctx, g, a, b, c.data());  // C = empty sum = 0
  EXPECT_EQ(c, (std::vector<float>(6, 0.0f)));
  c.assign(6, 9.0f);
  Gemm(ctx, GemmArgs{.m = 0, .n = 3, .k = 4}, a, b, c.data());
  Gemm(ctx, GemmArgs{.m = 2, .n = 0, .k = 4}, a, b, c.data());
  EXPECT_EQ(c, (std::vector<float>(6, 9.0f)));
}

TEST(GemmDeathTest, ChecksArguments) {
  ThreadPool pool(1);
  const KernelCtx ctx(pool);
  std::vector<float> a(64), b(64), c(64);
  EXPECT_DEATH(Gemm(ctx, GemmArgs{.m = 4, .n = 4, .k = 4, .lda = 3}, a.data(), b.data(), c.data()),
               "lda 3 < 4");
  EXPECT_DEATH(Gemm(ctx, GemmArgs{.m = 4, .n = 4, .k = 4, .trans_b = Trans::kT, .ldb = 2},
                    a.data(), b.data(), c.data()),
               "ldb 2 < 4");
  EXPECT_DEATH(Gemm(ctx, GemmArgs{.m = 4, .n = 4, .k = 4, .ldc = 1}, a.data(), b.data(), c.data()),
               "ldc 1 < n");
  EXPECT_DEATH(Gemm(ctx, GemmArgs{.m = -1, .n = 4, .k = 4}, a.data(), b.data(), c.data()),
               "must be >= 0");
}

TEST(Gemm, KBlockIsFixedPerTier) {
  for (const Tier& tier : GemmTiers()) {
    const Isa isa = tier.isa;
    const bool avx512 = isa == Isa::kAvx512;
    EXPECT_EQ(GemmKBlock(isa, false), avx512 ? 1024 : 256) << IsaName(isa);
    const bool native_bf16 = avx512 && GetCpuFeatures().avx512_bf16;
    EXPECT_EQ(GemmKBlock(isa, true), native_bf16 ? 2048 : 256) << IsaName(isa);
  }
}

}  // namespace
}  // namespace anvil::kernels
