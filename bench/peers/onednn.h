// oneDNN (DNNL 2.6, Debian's OpenMP build) matmul as a GEMM peer: a primitive
// created once per shape, executed on caller-owned buffers (no copies).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace anvil::bench {

class OneDnnMatmul {
 public:
  // C[m, n] = op(A)·op(B), row-major with tight leading dimensions (A is
  // [k, m] when trans_a, B is [n, k] when trans_b); bf16 or f32 in, f32 or
  // bf16 out. Null (with *error) if oneDNN cannot make it.
  static std::unique_ptr<OneDnnMatmul> Create(int64_t m, int64_t n, int64_t k, bool trans_a,
                                              bool trans_b, bool bf16_in, bool bf16_out,
                                              std::string* error);
  ~OneDnnMatmul();

  void Run(const void* a, const void* b, void* c);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// W8A8's peer: C[m, n] (f32) = (A [m, k] u8 · B [k, n] s8) * scales[n],
// oneDNN's int8 matmul (VNNI where the CPU has it) with per-column output
// scales, B reordered once into the primitive's layout as a model's weights
// would be. No zero point: a u8 A is taken as is (the int8 GEMM's work, a
// little less than a signed A's), and the activations' quantization is not
// in it (anvil's W8A8 timing includes its own).
class OneDnnInt8Matmul {
 public:
  static std::unique_ptr<OneDnnInt8Matmul> Create(int64_t m, int64_t n, int64_t k,
                                                  const int8_t* b, const float* scales,
                                                  std::string* error);
  ~OneDnnInt8Matmul();
  void Run(const uint8_t* a, float* c);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// oneDNN runs on OpenMP threads: sets their count for the calling thread's
// parallel regions (omp_set_num_threads, found in the libgomp oneDNN loads).
void SetOneDnnThreads(int threads);

// The instruction set oneDNN dispatches to ("avx512_core_bf16", ...).
// Holds oneDNN to AVX2 kernels (dnnl_set_max_cpu_isa); before its first primitive.
void CapOneDnnToAvx2();
std::string OneDnnIsa();

}  // namespace anvil::bench
