// BLAS, loaded on first use. Linking OpenBLAS into the one runsnack binary
// made every command (`runsnack id`, `run`, ...) start OpenBLAS's thread pool
// (one spinning thread per core) and its 40-odd libraries; only a matmul
// worker and the coordinator's check need it.
#pragma once

#include <cblas.h>  // types and enums only; the functions come from dlopen

namespace runsnack::pool::matmul::blas {

// Throw std::runtime_error naming the package to install when no BLAS with
// the CBLAS interface can be loaded.
void sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
void sgemv(CBLAS_ORDER order, CBLAS_TRANSPOSE t, int m, int n, float alpha, const float* a, int lda,
           const float* x, int incx, float beta, float* y, int incy);

}  // namespace runsnack::pool::matmul::blas
