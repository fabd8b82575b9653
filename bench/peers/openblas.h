// OpenBLAS as a GEMM peer, loaded with dlopen so that its environment can be
// fixed inside the benchmark process only: OPENBLAS_CORETYPE and
// OPENBLAS_L2_SIZE (set on these machines, pinning it to slow AVX2 kernels)
// are removed before the library initialises. Never linked into anvil.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace anvil::bench {

class OpenBlas {
 public:
  // Loads libopenblas.so.0 and sets its thread count; null (with *error) if
  // the library or a symbol is missing. Call before anything else loads it.
  // `cap_to_avx2`: use OpenBLAS's Haswell (AVX2) kernels on an AVX-512 host,
  // to compare against anvil's AVX2 tier on the same footing.
  static std::unique_ptr<OpenBlas> Load(int threads, std::string* error, bool cap_to_avx2 = false);

  // The kernel family OpenBLAS picked for this CPU ("Haswell", "SkylakeX", ...).
  std::string core_name() const;
  bool has_sbgemm() const { return sbgemm_ != nullptr; }

  // Row-major C[m, n] = op(A)·op(B) (alpha 1, beta 0), as cblas_sgemm.
  void Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
             int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) const;
  // The same with bf16 inputs and f32 output (cblas_sbgemm); has_sbgemm() only.
  void Sbgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const uint16_t* a,
              int64_t lda, const uint16_t* b, int64_t ldb, float* c, int64_t ldc) const;

 private:
  using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                           int, float, float*, int);
  using SbgemmFn = void (*)(int, int, int, int, int, int, float, const uint16_t*, int,
                            const uint16_t*, int, float, float*, int);
  SgemmFn sgemm_ = nullptr;
  SbgemmFn sbgemm_ = nullptr;
  char* (*corename_)() = nullptr;
};

}  // namespace anvil::bench
