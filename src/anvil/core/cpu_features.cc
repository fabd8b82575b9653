// CPUID-based feature detection.
#include "anvil/core/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "anvil/core/check.h"

namespace anvil {
namespace {

uint64_t ReadXcr0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

CpuFeatures Detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & bit_OSXSAVE;
  const bool fma = c & bit_FMA;
  const bool f16c = c & bit_F16C;
  const bool avx = c & bit_AVX;
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;             // SSE + AVX state
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;           // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!ymm_state) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = b & bit_AVX2;
  f.fma = fma;
  f.f16c = f16c;
  {
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx_vnni = a1 & bit_AVXVNNI;
  }
  if (zmm_state) {
    f.avx512f = b & bit_AVX512F;
    f.avx512dq = b & bit_AVX512DQ;
    f.avx512bw = b & bit_AVX512BW;
    f.avx512vl = b & bit_AVX512VL;
    f.avx512_vnni = c & bit_AVX512VNNI;
    f.avx512_vbmi = c & bit_AVX512VBMI;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = a1 & bit_AVX512BF16;
  }
  // AMX: CPUID.7.0:EDX bits 22 (AMX-BF16), 24 (AMX-TILE) and 25 (AMX-INT8);
  // XCR0 bits 17 (tile config) and 18 (tile data).
  const bool tile_state = (xcr0 & (uint64_t{3} << 17)) == (uint64_t{3} << 17);
  f.amx_bf16 = f.avx512_bf16 && tile_state && (d & (1u << 22)) && (d & (1u << 24));
  f.amx_int8 = f.amx_bf16 && (d & (1u << 25));
  return f;
}

}  // namespace

Result<Isa> ParseIsa(const char* text) {
  if (std::strcmp(text, "scalar") == 0) return Isa::kScalar;
  if (std::strcmp(text, "avx2") == 0) return Isa::kAvx2;
  if (std::strcmp(text, "avx512") == 0) return Isa::kAvx512;
  return InvalidArgument(std::string("ANVIL_ISA must be scalar, avx2 or avx512, not '") + text +
                         "'");
}

namespace {

Isa DetectBestIsa() {
  const CpuFeatures& f = GetCpuFeatures();
  Isa best = Isa::kScalar;
  if (f.avx2 && f.fma && f.f16c) best = Isa::kAvx2;
  if (best == Isa::kAvx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
    best = Isa::kAvx512;
  }
  if (const char* env = std::getenv("ANVIL_ISA")) {
    const Result<Isa> wanted = ParseIsa(env);
    if (!wanted.ok()) CheckFailed(__FILE__, __LINE__, wanted.status().ToString());
    if (static_cast<int>(*wanted) < static_cast<int>(best)) best = *wanted;
  }
  return best;
}

}  // namespace

std::string CpuFeatures::ToString() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(avx512f, "AVX-512F");
  add(avx512bw, "AVX-512BW");
  add(avx512vl, "AVX-512VL");
  add(avx512dq, "AVX-512DQ");
  add(avx512_bf16, "AVX512_BF16");
  add(avx512_vnni, "AVX512_VNNI");
  add(avx512_vbmi, "AVX512_VBMI");
  add(avx_vnni, "AVX_VNNI");
  add(amx_bf16, "AMX_BF16");
  add(amx_int8, "AMX_INT8");
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  return s.empty() ? "none" : s;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "unknown";
}

Isa BestIsa() {
  static const Isa best = DetectBestIsa();
  return best;
}

bool AmxEnabled() {
  static const bool enabled = [] {
    bool wanted = true;
    if (const char* env = std::getenv("ANVIL_AMX")) {
      if (std::strcmp(env, "0") != 0 && std::strcmp(env, "1") != 0) {
        CheckFailed(__FILE__, __LINE__, std::string("ANVIL_AMX must be 0 or 1, not '") + env + "'");
      }
      wanted = env[0] == '1';
    }
    if (!wanted || !GetCpuFeatures().amx_bf16) return false;
    // Linux hands out the tile data state (XFEATURE_XTILEDATA, 18) per
    // process on request; without it the first tile instruction faults, so
    // a refusal (an old kernel) leaves bf16 on vdpbf16ps.
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return enabled;
}

bool IsaSupported(Isa isa) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return f.avx2 && f.fma && f.f16c;
    case Isa::kAvx512: return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  }
  return false;
}

}  // namespace anvil
