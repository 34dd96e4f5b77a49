// The remote-CUDA benchmark program (bench/cuda_bench.sh runs it natively and
// through `runsnack cuda`). Built with nvcc's default static cudart.
//   copy_bench copy MIB REPEATS   host-to-device and device-to-host cudaMemcpy
//                                 of MIB MiB, pageable and pinned memory
//   copy_bench launch N           N empty kernel launches, then one synchronize
// Prints one "RESULT <name> <value> <unit>" line per figure.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void empty_kernel(int) {}

#define CHECK(expr)                                                                            \
  do {                                                                                         \
    cudaError_t e_ = (expr);                                                                   \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorName(e_));                   \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void copies(const char* label, unsigned char* host, void* dev, std::size_t bytes, int repeats) {
  CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));  // warm up
  auto t = Clock::now();
  for (int i = 0; i < repeats; ++i) CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  double h2d = seconds_since(t);
  t = Clock::now();
  for (int i = 0; i < repeats; ++i) CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
  double d2h = seconds_since(t);
  const double gb = static_cast<double>(bytes) * repeats / 1e9;
  std::printf("RESULT h2d_%s %.3f GB/s\n", label, gb / h2d);
  std::printf("RESULT d2h_%s %.3f GB/s\n", label, gb / d2h);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: copy_bench copy MIB REPEATS | copy_bench launch N\n");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s\n", prop.name);
  if (std::strcmp(argv[1], "launch") == 0) {
    const int n = std::atoi(argv[2]);
    empty_kernel<<<1, 1>>>(0);
    CHECK(cudaDeviceSynchronize());
    auto t = Clock::now();
    for (int i = 0; i < n; ++i) empty_kernel<<<1, 1>>>(i);
    CHECK(cudaGetLastError());
    double issue = seconds_since(t);
    CHECK(cudaDeviceSynchronize());
    double total = seconds_since(t);
    std::printf("RESULT launch_issue %.3f us/launch\n", issue * 1e6 / n);
    std::printf("RESULT launch_total %.3f us/launch\n", total * 1e6 / n);
    return 0;
  }
  const std::size_t bytes = static_cast<std::size_t>(std::atoi(argv[2])) << 20;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 4;
  void* dev = nullptr;
  CHECK(cudaMalloc(&dev, bytes));
  std::vector<unsigned char> pageable(bytes, 7);
  copies("pageable", pageable.data(), dev, bytes, repeats);
  unsigned char* pinned = nullptr;
  CHECK(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 7, bytes);
  copies("pinned", pinned, dev, bytes, repeats);
  CHECK(cudaFreeHost(pinned));
  CHECK(cudaFree(dev));
  return 0;
}
