// blas.hpp's two functions in plain C++, for the WebAssembly kernels (no
// BLAS library to load in a browser). Row-major only, as matrix.cpp calls
// them. The seeded jobs' entries make every partial sum exact in float32
// (matrix.cpp), so this order of additions gives OpenBLAS's bits.
#include "pool/matmul/blas.hpp"

#include <cstdlib>

namespace runsnack::pool::matmul::blas {
namespace {

using F4 = float __attribute__((vector_size(16)));  // f32x4 with -msimd128

F4 load4(const float* p) {
  F4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
float sum4(F4 v) { return (v[0] + v[1]) + (v[2] + v[3]); }

// a[i, :] . bt[j, :] for two rows of a and two of bt at once (four sums share loads).
void dot2x2(const float* a0, const float* a1, const float* b0, const float* b1, int k, float out[4]) {
  F4 s00{}, s01{}, s10{}, s11{};
  int p = 0;
  for (; p + 4 <= k; p += 4) {
    const F4 x0 = load4(a0 + p), x1 = load4(a1 + p), y0 = load4(b0 + p), y1 = load4(b1 + p);
    s00 += x0 * y0, s01 += x0 * y1, s10 += x1 * y0, s11 += x1 * y1;
  }
  out[0] = sum4(s00), out[1] = sum4(s01), out[2] = sum4(s10), out[3] = sum4(s11);
  for (; p < k; ++p) out[0] += a0[p] * b0[p], out[1] += a0[p] * b1[p], out[2] += a1[p] * b0[p], out[3] += a1[p] * b1[p];
}

}  // namespace

void sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha,
           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  if (order != CblasRowMajor) std::abort();
  auto put = [&](int i, int j, float v) {
    float& out = c[i * ldc + j];
    out = alpha * v + (beta == 0.0f ? 0.0f : beta * out);
  };
  if (ta == CblasNoTrans && tb == CblasTrans) {  // C = A * Bt': rows against rows (a seeded tile)
    for (int i = 0; i < m; i += 2)
      for (int j = 0; j < n; j += 2) {
        const int i1 = i + 1 < m ? i + 1 : i, j1 = j + 1 < n ? j + 1 : j;
        float s[4];
        dot2x2(a + i * lda, a + i1 * lda, b + j * ldb, b + j1 * ldb, k, s);
        put(i, j, s[0]);
        if (j1 != j) put(i, j1, s[1]);
        if (i1 != i) put(i1, j, s[2]);
        if (i1 != i && j1 != j) put(i1, j1, s[3]);
      }
    return;
  }
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float s = 0;
      for (int p = 0; p < k; ++p)
        s += (ta == CblasNoTrans ? a[i * lda + p] : a[p * lda + i]) * (tb == CblasNoTrans ? b[p * ldb + j] : b[j * ldb + p]);
      put(i, j, s);
    }
}

void sgemv(CBLAS_ORDER order, CBLAS_TRANSPOSE t, int m, int n, float alpha, const float* a, int lda,
           const float* x, int incx, float beta, float* y, int incy) {
  if (order != CblasRowMajor) std::abort();
  const int outs = t == CblasNoTrans ? m : n, len = t == CblasNoTrans ? n : m;
  for (int i = 0; i < outs; ++i) {
    float s = 0;
    for (int p = 0; p < len; ++p) s += (t == CblasNoTrans ? a[i * lda + p] : a[p * lda + i]) * x[p * incx];
    y[i * incy] = alpha * s + (beta == 0.0f ? 0.0f : beta * y[i * incy]);
  }
}

}  // namespace runsnack::pool::matmul::blas
