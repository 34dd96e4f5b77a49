// The remote-CUDA smoke program: device query, memory round trip, memset,
// one kernel. Built with nvcc's default static cudart. Each step prints one
// line; the exit status is 0 only when the kernel ran and its result is right.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

#define STEP(label, expr)                                                    \
  do {                                                                       \
    cudaError_t e_ = (expr);                                                 \
    std::printf("%s: %s\n", label, e_ == cudaSuccess ? "ok" : cudaGetErrorName(e_)); \
    if (e_ != cudaSuccess) return 1;                                         \
  } while (0)

int main() {
  int count = 0;
  STEP("device count", cudaGetDeviceCount(&count));
  cudaDeviceProp prop{};
  STEP("properties", cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

  const int n = 1 << 20;
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) a[i] = static_cast<float>(i), b[i] = 2.0f * static_cast<float>(i);
  float *da = nullptr, *db = nullptr, *dc = nullptr;
  STEP("malloc", cudaMalloc(&da, n * sizeof(float)));
  STEP("malloc", cudaMalloc(&db, n * sizeof(float)));
  STEP("malloc", cudaMalloc(&dc, n * sizeof(float)));
  STEP("copy a", cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  STEP("copy b", cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  std::vector<float> back(n);
  STEP("copy back a", cudaMemcpy(back.data(), da, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("round trip: %s\n", back == a ? "ok" : "WRONG");
  STEP("memset", cudaMemset(dc, 0, n * sizeof(float)));
  STEP("copy back c", cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("memset result: %s\n", c[0] == 0.0f && c[n - 1] == 0.0f ? "ok" : "WRONG");

  add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  cudaError_t launched = cudaGetLastError();
  cudaError_t synced = cudaDeviceSynchronize();
  std::printf("kernel: %s\n", cudaGetErrorName(launched != cudaSuccess ? launched : synced));
  if (launched != cudaSuccess || synced != cudaSuccess) return 2;
  STEP("copy back c", cudaMemcpy(c.data(), dc, n * sizeof(float), cudaMemcpyDeviceToHost));
  bool right = true;
  for (int i = 0; i < n; ++i) right = right && c[i] == 3.0f * static_cast<float>(i);
  std::printf("result: %s\n", right ? "ok" : "WRONG");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  return right ? 0 : 3;
}
