// Test-only helpers shared by the row-wise kernel tests: a kernel context per
// (tier, thread count), seeded random inputs, bit comparison, and the unit
// roundoffs that tolerances are derived from.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "anvil/core/bf16.h"
#include "anvil/core/cpu_features.h"
#include "anvil/core/thread_pool.h"
#include "anvil/kernels/ctx.h"

namespace anvil::kernels::testing {

inline constexpr double kU = 0x1p-24;     // f32 unit roundoff (RNE)
inline constexpr double kUBf16 = 0x1p-8;  // bf16 unit roundoff (RNE)

// Every tier this CPU can run, the portable one first.
inline std::vector<Isa> SupportedIsas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(isa)) isas.push_back(isa);
  }
  return isas;
}

// A GEMM tier as the GEMM tests run it: on the avx512 tier of a CPU with
// AMX, bf16 GEMMs run on vdpbf16ps (amx false) or AMX tiles (true), each
// its own kernel, so both are checked there.
struct GemmTier {
  Isa isa;
  bool amx;
  std::string Name() const { return std::string(IsaName(isa)) + (amx ? "+amx" : ""); }
};

inline std::vector<GemmTier> GemmTiers() {
  std::vector<GemmTier> tiers;
  for (const Isa isa : SupportedIsas()) tiers.push_back({isa, false});
  if (IsaSupported(Isa::kAvx512) && AmxEnabled()) tiers.push_back({Isa::kAvx512, true});
  return tiers;
}

// A context for `isa` on a pool of `threads` (1 or 2), built once per
// process; `amx`: KernelCtx's (bf16 GEMMs on AMX tiles where the CPU has them).
inline const KernelCtx& Ctx(Isa isa, int threads, bool amx = true) {
  static ThreadPool* pools[2] = {new ThreadPool(1), new ThreadPool(2)};
  static std::map<std::tuple<Isa, int, bool>, std::unique_ptr<KernelCtx>> ctxs;
  auto& slot = ctxs[{isa, threads, amx}];
  if (!slot) slot = std::make_unique<KernelCtx>(*pools[threads - 1], isa, size_t{1} << 20, amx);
  return *slot;
}

inline std::vector<float> RandomF32(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<BF16> ToBF16(const std::vector<float>& v) {
  std::vector<BF16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = anvil::ToBF16(v[i]);
  return out;
}

// Random values of element type T (f32, or f32 values rounded to bf16).
template <typename T>
std::vector<T> Random(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  if constexpr (std::is_same_v<T, BF16>) {
    return ToBF16(RandomF32(n, seed, lo, hi));
  } else {
    return RandomF32(n, seed, lo, hi);
  }
}

inline double AsDouble(float x) { return x; }
inline double AsDouble(BF16 x) { return ToFloat(x); }

// Unit roundoff of the storage type T.
template <typename T>
constexpr double StorageU() {
  return std::is_same_v<T, BF16> ? kUBf16 : kU;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace anvil::kernels::testing
