// Run-time CPU feature detection (CPUID + XGETBV) and the SIMD level the
// process dispatches to. Decided once, high up; kernels receive the Isa.
#pragma once

#include <string>

#include "anvil/core/status.h"

namespace anvil {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx512_vbmi = false;  // byte permutes (vpermi2b): GemmFp8's streaming decode
  bool avx_vnni = false;  // VEX-encoded vpdpbusd on ymm (the AVX2 tier's integer GEMM)
  bool amx_bf16 = false;  // AMX-TILE + AMX-BF16 with the tile state enabled by the OS
  bool amx_int8 = false;  // AMX-INT8 beside them (tdpbssd: the integer GEMM)

  // "AVX-512F AVX-512BW ... FMA" for --version and `anvil env`.
  std::string ToString() const;
};

// Detected once per process (the OS must have enabled the register state).
const CpuFeatures& GetCpuFeatures();

// The instruction-set tiers with their own code paths.
enum class Isa {
  kScalar,  // portable C++; the reference every SIMD path must agree with
  kAvx2,    // AVX2 + FMA + F16C
  kAvx512,  // AVX-512 F/BW/VL/DQ (+ BF16/VNNI where the kernel needs them)
};

const char* IsaName(Isa isa);

// The best tier this CPU supports, lowered by ANVIL_ISA=scalar|avx2|avx512
// when set (to exercise the slower paths on a fast machine).
Isa BestIsa();

// The value of ANVIL_ISA: "scalar", "avx2" or "avx512".
Result<Isa> ParseIsa(const char* text);

// Whether bf16 GEMMs may run on AMX tiles: the CPU has AMX-BF16, the OS
// granted this process the tile data state (Linux's ARCH_REQ_XCOMP_PERM,
// asked for on the first call), and ANVIL_AMX is not "0" (set it to 0 to
// run bf16 on vdpbf16ps instead). Only the avx512 tier uses it (KernelCtx).
bool AmxEnabled();

// Whether this CPU can run code compiled for `isa`.
bool IsaSupported(Isa isa);

}  // namespace anvil
