// The sampler's softmax numerators in double and their running sums, with the
// same bits on every tier and every build (native or portable):
//   weights[i] = ExpF64(fma(double(x[i]), scale, -shift))
//   sums[i]    = ((weights[0] + weights[1]) + ...) + weights[i]   (in order)
// ExpF64 is e^x in double by the algorithm of glibc's exp since 2.28 (from
// Arm's optimized-routines: a 128-entry 2^(k/128) table and a degree-5
// polynomial, < 0.52 ulp), every operation and fusion of its x86-64 FMA build
// written out, so on an FMA machine it returns the bits std::exp returns there
// (exp_sums_test checks them against each other), without depending on the
// libm it runs with. The SIMD tiers evaluate it 4 (AVX2) or 8 (AVX-512) lanes
// at a time; the running sums stay one chain, element after element. The
// scalar tier spells its fused operations std::fma: one instruction in a
// native build, a libm call in a portable one (software where the CPU has no
// FMA, so a pre-AVX2 CPU samples slower than with libm's exp).
//
// Special values follow e^x: -inf and x < -745.2 -> +0, x > 709.8 and +inf ->
// +inf, NaN -> NaN; results below 2^-1022 are subnormal, rounded once.
#pragma once

#include <cstdint>

#include "anvil/core/cpu_features.h"

namespace anvil::kernels {

double ExpF64(double x);

// One row on the calling thread. weights and sums hold n doubles; x, weights
// and sums do not overlap. n >= 0.
void ExpRunningSums(Isa isa, int64_t n, const float* x, double scale, double shift, double* weights,
                    double* sums);

// The sampler's other row kernel: the index its scan over the logits finds,
//   best = 0; for i = 1 .. n - 1: if (x[i] > x[best]) best = i;
// the first of the largest values (+0 and -0 tie: the first wins), a NaN
// never taking over (one at 0 stays the answer). The SIMD tiers take the
// largest non-NaN value in any order (a max is exact), then find its first
// occurrence. One row on the calling thread; n >= 1.
int64_t FirstMaxIndex(Isa isa, int64_t n, const float* x);

}  // namespace anvil::kernels
