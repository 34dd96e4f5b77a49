// cuBLAS SGEMM on 256x256 matrices, checked against the CPU. Prints the
// device, whether the product matches, and a checksum (same natively and remotely).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  const int n = 256;
  std::vector<float> a(n * n), b(n * n), c(n * n, 0.0f), ref(n * n, 0.0f);
  for (int i = 0; i < n * n; ++i) a[i] = static_cast<float>(i % 7) - 3.0f, b[i] = static_cast<float>(i % 5) * 0.5f;
  for (int col = 0; col < n; ++col)
    for (int k = 0; k < n; ++k)
      for (int row = 0; row < n; ++row) ref[col * n + row] += a[k * n + row] * b[col * n + k];
  float *da, *db, *dc;
  cudaMalloc(&da, n * n * sizeof(float));
  cudaMalloc(&db, n * n * sizeof(float));
  cudaMalloc(&dc, n * n * sizeof(float));
  cudaMemcpy(da, a.data(), n * n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), n * n * sizeof(float), cudaMemcpyHostToDevice);
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return std::printf("cublasCreate failed\n"), 1;
  const float one = 1.0f, zero = 0.0f;
  cublasStatus_t s = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, da, n, db, n, &zero, dc, n);
  cudaMemcpy(c.data(), dc, n * n * sizeof(float), cudaMemcpyDeviceToHost);
  double worst = 0, sum = 0;
  for (int i = 0; i < n * n; ++i) worst = std::fmax(worst, std::fabs(c[i] - ref[i])), sum += ref[i];
  std::printf("sgemm: %s, matches CPU: %s, checksum %.1f\n", cublasGetStatusName(s), worst < 1e-2 ? "yes" : "NO", sum);
  cublasDestroy(h);
  return s == CUBLAS_STATUS_SUCCESS && worst < 1e-2 ? 0 : 1;
}
