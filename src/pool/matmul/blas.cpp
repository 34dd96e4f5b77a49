#include "pool/matmul/blas.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace runsnack::pool::matmul::blas {

namespace {

struct Functions {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_sgemv) sgemv = nullptr;
  std::string error;
};

Functions load() {
  Functions f;
  // OpenBLAS first (Debian's libopenblas0), then whatever the blas
  // alternative points at, if it carries the CBLAS symbols.
  for (const char* name : {"libopenblas.so.0", "libblas.so.3"}) {
    void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    f.sgemm = reinterpret_cast<decltype(f.sgemm)>(dlsym(lib, "cblas_sgemm"));
    f.sgemv = reinterpret_cast<decltype(f.sgemv)>(dlsym(lib, "cblas_sgemv"));
    if (f.sgemm != nullptr && f.sgemv != nullptr) return f;
    dlclose(lib);
  }
  f.sgemm = nullptr;
  f.sgemv = nullptr;
  f.error = "matmul: no BLAS library found (install OpenBLAS: apt install libopenblas0)";
  return f;
}

const Functions& functions() {
  static const Functions f = load();  // thread-safe, once
  if (f.sgemm == nullptr) throw std::runtime_error(f.error);
  return f;
}

}  // namespace

void sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  functions().sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void sgemv(CBLAS_ORDER order, CBLAS_TRANSPOSE t, int m, int n, float alpha, const float* a, int lda,
           const float* x, int incx, float beta, float* y, int incy) {
  functions().sgemv(order, t, m, n, alpha, a, lda, x, incx, beta, y, incy);
}

}  // namespace runsnack::pool::matmul::blas
