// The CUDA side of the GPU boundary (gpu_kernel.hpp): uploads a scene's
// arrays, runs the shared tracer (tracer.hpp) one thread per pixel, and
// brings back the sample means. Samples are added in launches of bounded
// size (a display GPU's watchdog kills long kernels); each launch adds its
// samples to a float accumulator in the same order the CPU adds them.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <string>

#include "pool/render/gpu_kernel.hpp"
#include "pool/render/tracer.hpp"

namespace runsnack::render::gpu {
namespace {

constexpr long long kSamplesPerLaunch = 1ll << 24;

struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, DeviceFree>;

std::string cuda_error(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorString(e);
}

// Copies n elements to a new device buffer owned by `buffer`; "" or CUDA's error.
template <class T>
std::string upload(const T* host, std::size_t n, DeviceBuffer& buffer, const T*& device) {
  device = nullptr;
  if (n == 0) return "";
  void* p = nullptr;
  if (cudaError_t e = cudaMalloc(&p, n * sizeof(T)); e != cudaSuccess) return cuda_error("cudaMalloc", e);
  buffer.reset(p);
  if (cudaError_t e = cudaMemcpy(p, host, n * sizeof(T), cudaMemcpyHostToDevice); e != cudaSuccess)
    return cuda_error("cudaMemcpy", e);
  device = static_cast<const T*>(p);
  return "";
}

__global__ void render_kernel(SceneView view, int x0, int y0, int w, int h, int first, int last, float* acc) {
  int col = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  int row = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (col >= w || row >= h) return;
  std::size_t i = (static_cast<std::size_t>(row) * static_cast<std::size_t>(w) + col) * 3;
  Vec3 sum{acc[i], acc[i + 1], acc[i + 2]};
  sum = tracer::accumulate_samples(view, x0 + col, y0 + row, first, last, sum);
  acc[i] = sum.x;
  acc[i + 1] = sum.y;
  acc[i + 2] = sum.z;
}

}  // namespace

bool compiled() { return true; }

bool available() {
  // Counting devices is not enough: creating the context (cudaFree(nullptr))
  // is what fails when the driver is too old for this build or the process
  // cannot map GPU memory. Probed once; the answer holds for the process.
  static const bool usable = [] {
    int count = 0;
    bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0 && cudaFree(nullptr) == cudaSuccess;
    cudaGetLastError();  // clear a "no driver" or "no device" error
    return ok;
  }();
  return usable;
}

std::string render_linear(const SceneView& host_view, const SceneSizes& sizes, int x, int y, int w, int h,
                          int spp, float* out) {
  SceneView dv = host_view;
  DeviceBuffer materials, spheres, planes, triangles, nodes, refs, lights, acc;
  // Each upload runs only while the ones before it succeeded.
  std::string e =
      upload(host_view.materials, static_cast<std::size_t>(sizes.materials), materials, dv.materials);
  if (e.empty()) e = upload(host_view.spheres, static_cast<std::size_t>(dv.num_spheres), spheres, dv.spheres);
  if (e.empty()) e = upload(host_view.planes, static_cast<std::size_t>(dv.num_planes), planes, dv.planes);
  if (e.empty())
    e = upload(host_view.triangles, static_cast<std::size_t>(sizes.triangles), triangles, dv.triangles);
  if (e.empty()) e = upload(host_view.nodes, static_cast<std::size_t>(dv.num_nodes), nodes, dv.nodes);
  if (e.empty()) e = upload(host_view.refs, static_cast<std::size_t>(sizes.refs), refs, dv.refs);
  if (e.empty()) e = upload(host_view.lights, static_cast<std::size_t>(dv.num_lights), lights, dv.lights);
  if (!e.empty()) return e;

  const std::size_t n = static_cast<std::size_t>(w) * static_cast<std::size_t>(h) * 3;
  void* p = nullptr;
  if (cudaError_t err = cudaMalloc(&p, n * sizeof(float)); err != cudaSuccess)
    return cuda_error("cudaMalloc", err);
  acc.reset(p);
  if (cudaError_t err = cudaMemset(p, 0, n * sizeof(float)); err != cudaSuccess)
    return cuda_error("cudaMemset", err);

  const dim3 block(16, 8);
  const dim3 grid(static_cast<unsigned>((w + 15) / 16), static_cast<unsigned>((h + 7) / 8));
  const long long pixels = static_cast<long long>(w) * h;
  const int per_launch = static_cast<int>(std::clamp<long long>(kSamplesPerLaunch / pixels, 1, spp));
  for (int first = 0; first < spp; first += per_launch) {
    int last = std::min(spp, first + per_launch);
    render_kernel<<<grid, block>>>(dv, x, y, w, h, first, last, static_cast<float*>(p));
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return cuda_error("kernel launch", err);
  }
  if (cudaError_t err = cudaMemcpy(out, p, n * sizeof(float), cudaMemcpyDeviceToHost); err != cudaSuccess)
    return cuda_error("render kernel", err);
  for (std::size_t i = 0; i < n; i += 3) {
    Vec3 m = tracer::sample_mean(Vec3{out[i], out[i + 1], out[i + 2]}, spp);
    out[i] = m.x;
    out[i + 1] = m.y;
    out[i + 2] = m.z;
  }
  return "";
}

}  // namespace runsnack::render::gpu
