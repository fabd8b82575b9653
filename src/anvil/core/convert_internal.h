// The bulk-conversion kernels of one instruction set, as a table convert.cc
// dispatches through; each ISA's table lives in a unit built with its flags.
#pragma once

#include <cstddef>
#include <cstdint>

// The ISA units must not call inline functions from headers: the linker may
// keep their AVX-512 copy for every caller. So they handle tails with masks or
// a padded block, never with the scalar functions of convert.h.

namespace anvil {

enum class Overflow;

namespace convert_internal {

struct Kernels {
  void (*f32_to_bf16)(const float* src, uint16_t* dst, size_t n);
  void (*bf16_to_f32)(const uint16_t* src, float* dst, size_t n);
  void (*f32_to_f16)(const float* src, uint16_t* dst, size_t n);
  void (*f16_to_f32)(const uint16_t* src, float* dst, size_t n);
  void (*f32_to_e4m3)(const float* src, uint8_t* dst, size_t n, Overflow overflow);
  void (*e4m3_to_f32)(const uint8_t* src, float* dst, size_t n);
  void (*f32_to_e5m2)(const float* src, uint8_t* dst, size_t n, Overflow overflow);
  void (*e5m2_to_f32)(const uint8_t* src, float* dst, size_t n);
};

const Kernels& ScalarKernels();  // convert.cc
const Kernels& Avx2Kernels();    // convert_avx2.cc
const Kernels& Avx512Kernels();  // convert_avx512.cc

}  // namespace convert_internal
}  // namespace anvil
