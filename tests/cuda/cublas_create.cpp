// cublasCreate + cublasDestroy through the driver shim: cuBLAS's own
// initialisation (its static cudart, export tables, module loading) must
// succeed or fail only at a real device operation.
#include <cublas_v2.h>

#include <cstdio>

int main() {
  cublasHandle_t h = nullptr;
  cublasStatus_t s = cublasCreate(&h);
  std::printf("cublasCreate: %s\n", cublasGetStatusName(s));
  if (s != CUBLAS_STATUS_SUCCESS) return 1;
  s = cublasDestroy(h);
  std::printf("cublasDestroy: %s\n", cublasGetStatusName(s));
  return s == CUBLAS_STATUS_SUCCESS ? 0 : 1;
}
