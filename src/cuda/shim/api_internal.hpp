#pragma once
// What the shim's driver API entry points (api_*.cpp) share: the export macro,
// pointer/handle conversions, and what the client knows without asking.
// Each entry point is exported under the exact (versioned) name cuda.h maps it
// to; the generated table (proc_table.c) gives every other name a loud
// CUDA_ERROR_NOT_SUPPORTED stub.
#include "cuda/shim/client.hpp"

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#define API extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI

namespace runsnack::cuda::shim::api {

template <class T>
std::uint64_t u(T* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}
template <class T>
T as(std::uint64_t v) {
  return reinterpret_cast<T>(static_cast<std::uintptr_t>(v));
}
inline std::uint64_t read_u64(const std::vector<std::uint8_t>& r, std::size_t at = 0) {
  std::uint64_t v = 0;
  if (r.size() >= at + 8) std::memcpy(&v, r.data() + at, 8);
  return v;
}
inline CUresult R(int rc) { return static_cast<CUresult>(rc); }

// What the client knows without asking: allocations (for pointer queries and
// cuMemcpy's direction) and each function's parameter layout.
struct Local {
  std::mutex mutex;
  std::map<std::uint64_t, std::uint64_t> allocations;  // dptr -> size
  std::map<std::uint64_t, std::vector<wire::Param>> params;  // function/kernel handle -> layout
  std::map<void*, std::size_t> host_allocations;  // cuMemHostAlloc'd buffers
  std::map<int, std::uint64_t> primary;  // device -> primary context handle
  std::map<int, unsigned> primary_flags;
  std::map<std::uint64_t, int> contexts;  // cuCtxCreate'd context -> device
};
inline Local& local() {
  static Local* l = new Local;  // one for the whole library (an inline function's static)
  return *l;
}

inline int device_of(std::uint64_t ctx) {
  auto& l = local();
  std::lock_guard lock(l.mutex);
  for (auto& [dev, h] : l.primary) {
    if (h == ctx) return dev;
  }
  if (auto it = l.contexts.find(ctx); it != l.contexts.end()) return it->second;
  return 0;
}

inline CUresult need_init() { return shim::initialised() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

inline CUresult device_ok(CUdevice dev) {
  if (!shim::initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || static_cast<std::size_t>(dev) >= shim::devices().size()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// Streams a (per-thread) default stream request maps to.
inline std::uint64_t stream_of(CUstream s, bool per_thread) {
  std::uint64_t v = u(s);
  return v == 0 && per_thread ? 2 : v;  // CU_STREAM_PER_THREAD
}

}  // namespace runsnack::cuda::shim::api
