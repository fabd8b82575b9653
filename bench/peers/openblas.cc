// OpenBLAS peer: dlopen, environment scrub, thread count.
#include "peers/openblas.h"

#include <dlfcn.h>

#include <cstdlib>

namespace anvil::bench {
namespace {
// cblas enum values (cblas.h).
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
constexpr int kTrans = 112;
}  // namespace

std::unique_ptr<OpenBlas> OpenBlas::Load(int threads, std::string* error, bool cap_to_avx2) {
  // Read by OpenBLAS's constructor at load time: drop the machine's pinning
  // for this process (it selects slow kernels), or pin to AVX2 on request.
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("OPENBLAS_L2_SIZE");
  if (cap_to_avx2) setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *error = std::string("dlopen libopenblas.so.0: ") + dlerror();
    return nullptr;
  }
  auto blas = std::unique_ptr<OpenBlas>(new OpenBlas());
  blas->sgemm_ = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
  blas->sbgemm_ = reinterpret_cast<SbgemmFn>(dlsym(lib, "cblas_sbgemm"));
  blas->corename_ = reinterpret_cast<char* (*)()>(dlsym(lib, "openblas_get_corename"));
  auto set_threads = reinterpret_cast<void (*)(int)>(dlsym(lib, "openblas_set_num_threads"));
  if (blas->sgemm_ == nullptr || blas->corename_ == nullptr || set_threads == nullptr) {
    *error = "libopenblas.so.0 lacks cblas_sgemm, openblas_get_corename or openblas_set_num_threads";
    return nullptr;
  }
  set_threads(threads);
  return blas;  // the library stays loaded for the life of the process
}

std::string OpenBlas::core_name() const { return corename_(); }

void OpenBlas::Sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
                     int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) const {
  sgemm_(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, static_cast<int>(m),
         static_cast<int>(n), static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b,
         static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

void OpenBlas::Sbgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                      const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float* c,
                      int64_t ldc) const {
  sbgemm_(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans,
          static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
          static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f, c, static_cast<int>(ldc));
}

}  // namespace anvil::bench
