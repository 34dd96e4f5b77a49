// cuda_loop: a CUDA program for the WAN lab (tests/netlab/outage_test.py,
// bench/wan_bench.sh), run through `runsnack cuda`. Each round copies 4 KiB to
// the device, launches a kernel that adds 1 to every word, copies the 4 KiB
// back and checks them: one synchronous round trip per round at best (the copy
// back), none for the launch.
//   cuda_loop ROUNDS [PAUSE_MS]
// Prints "round I T" after each round (T: seconds since the first), then
// "RESULT rounds N", "RESULT wall_s S", "RESULT ms_per_round M".
// Exit status 0 when every round's data came back right, 1 otherwise. On
// RunSnack's host test double `bump` is one of the kernels it runs
// (src/cuda/server/host_kernels.cpp), so the program runs there too.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

__global__ void bump(unsigned* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] += 1;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda_loop ROUNDS [PAUSE_MS]\n");
    return 2;
  }
  const int rounds = std::atoi(argv[1]);
  const int pause_ms = argc > 2 ? std::atoi(argv[2]) : 0;
  constexpr int kWords = 1024;
  std::vector<unsigned> host(kWords), back(kWords);
  unsigned* dev = nullptr;
  cudaError_t e = cudaMalloc(&dev, kWords * sizeof(unsigned));
  if (e != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc: %s\n", cudaGetErrorName(e));
    return 1;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) {
    for (int j = 0; j < kWords; ++j) host[j] = static_cast<unsigned>(r) * 7919u + static_cast<unsigned>(j);
    e = cudaMemcpy(dev, host.data(), kWords * sizeof(unsigned), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "round %d: copy to the device: %s\n", r, cudaGetErrorName(e));
      return 1;
    }
    bump<<<kWords / 256, 256>>>(dev, kWords);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
      std::fprintf(stderr, "round %d: launch: %s\n", r, cudaGetErrorName(e));
      return 1;
    }
    e = cudaMemcpy(back.data(), dev, kWords * sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
      std::fprintf(stderr, "round %d: copy back: %s\n", r, cudaGetErrorName(e));
      return 1;
    }
    for (int j = 0; j < kWords; ++j) {
      if (back[j] != host[j] + 1) {
        std::fprintf(stderr, "round %d: word %d came back %u, expected %u\n", r, j, back[j], host[j] + 1);
        return 1;
      }
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("round %d %.3f\n", r, t);
    std::fflush(stdout);
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("RESULT rounds %d\nRESULT wall_s %.3f\nRESULT ms_per_round %.3f\n", rounds, wall,
              rounds > 0 ? wall * 1000 / rounds : 0.0);
  cudaFree(dev);
  return 0;
}
