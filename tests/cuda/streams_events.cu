// Two streams with async copies, a kernel on each, events between them and
// a device printf. Prints results that do not depend on timing.
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

__global__ void scale(float* x, int n, float f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= f;
  if (i == 0) printf("device printf: scale by %.1f\n", f);
}

int main() {
  const int n = 1 << 16;
  std::vector<float> h0(n, 1.0f), h1(n, 2.0f);
  float *d0, *d1;
  cudaStream_t s0, s1;
  cudaEvent_t start, done0;
  cudaStreamCreate(&s0);
  cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking);
  cudaEventCreate(&start);
  cudaEventCreate(&done0);
  cudaMalloc(&d0, n * sizeof(float));
  cudaMalloc(&d1, n * sizeof(float));
  cudaEventRecord(start, s0);
  cudaMemcpyAsync(d0, h0.data(), n * sizeof(float), cudaMemcpyHostToDevice, s0);
  cudaMemcpyAsync(d1, h1.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1);
  scale<<<n / 256, 256, 0, s0>>>(d0, n, 3.0f);
  cudaEventRecord(done0, s0);
  cudaStreamWaitEvent(s1, done0, 0);
  scale<<<n / 256, 256, 0, s1>>>(d1, n, 5.0f);
  cudaMemcpyAsync(h0.data(), d0, n * sizeof(float), cudaMemcpyDeviceToHost, s0);
  cudaMemcpyAsync(h1.data(), d1, n * sizeof(float), cudaMemcpyDeviceToHost, s1);
  cudaStreamSynchronize(s0);
  cudaStreamSynchronize(s1);
  float ms = -1;
  cudaError_t e = cudaEventElapsedTime(&ms, start, done0);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += h0[i] + h1[i];
  std::printf("streams: sum %.1f (want %.1f), elapsed time %s\n", sum, n * 13.0, e == cudaSuccess && ms >= 0 ? "ok" : cudaGetErrorName(e));
  std::printf("last error: %s\n", cudaGetErrorName(cudaGetLastError()));
  return sum == n * 13.0 ? 0 : 1;
}
