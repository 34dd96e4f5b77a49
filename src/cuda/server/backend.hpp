// What serve_cuda executes requests on: the real driver (DriverBackend) or a
// host-RAM test double (HostBackend). Results are CUresult values; handles
// are the backend's own (CUcontext, CUmodule, ... as integers; device
// pointers are real CUdeviceptr values). Streams 0, 1 and 2 are the driver's
// legacy / per-thread default streams and pass through unchanged.
#pragma once

#include "cuda/wire.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace runsnack::cuda {

// The CUresult values the server produces itself (cuda.h is not needed here).
enum : int {
  kSuccess = 0,
  kErrInvalidValue = 1,
  kErrOutOfMemory = 2,
  kErrNotInitialized = 3,
  kErrNoDevice = 100,
  kErrInvalidDevice = 101,
  kErrInvalidImage = 200,
  kErrInvalidContext = 201,
  kErrInvalidHandle = 400,
  kErrNotFound = 500,
  kErrNotReady = 600,
  kErrNotSupported = 801,
  kErrUnknown = 999,
};

using u64 = std::uint64_t;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int init() = 0;
  virtual int driver_version(int& version) = 0;
  virtual int devices(std::vector<wire::DeviceInfo>& out) = 0;
  virtual int primary_ctx_retain(int dev, u64& ctx) = 0;
  virtual int primary_ctx_release(int dev) = 0;
  virtual int ctx_create(unsigned flags, int dev, u64& ctx) = 0;
  virtual int ctx_destroy(u64 ctx) = 0;
  virtual int set_current(u64 ctx) = 0;
  virtual int ctx_synchronize() = 0;
  virtual int mem_alloc(u64 size, u64& dptr) = 0;
  virtual int mem_free(u64 dptr) = 0;
  virtual int mem_get_info(u64& free, u64& total) = 0;
  virtual int memcpy_htod(u64 dst, const void* src, u64 n, u64 stream) = 0;
  virtual int memcpy_dtoh(void* dst, u64 src, u64 n, u64 stream) = 0;
  virtual int memcpy_dtod(u64 dst, u64 src, u64 n, u64 stream) = 0;
  virtual int memset(u64 dst, std::uint32_t value, std::uint32_t elem, u64 count, u64 stream) = 0;
  virtual int module_load(const void* image, std::size_t size, u64& module) = 0;
  virtual int module_unload(u64 module) = 0;
  virtual int module_get_function(u64 module, const std::string& name, u64& fn) = 0;
  virtual int module_get_global(u64 module, const std::string& name, u64& dptr, u64& size) = 0;
  virtual int library_load(const void* image, std::size_t size, u64& library) = 0;
  virtual int library_unload(u64 library) = 0;
  virtual int library_get_kernel(u64 library, const std::string& name, u64& kernel) = 0;
  virtual int library_get_global(u64 library, const std::string& name, u64& dptr, u64& size) = 0;
  virtual int kernel_get_function(u64 kernel, u64& fn) = 0;
  // Parameter layout of a function (or, with is_kernel, a library kernel).
  virtual int param_info(u64 fn, bool is_kernel, std::vector<wire::Param>& out) = 0;
  virtual int func_get_attribute(u64 fn, int attrib, int& value) = 0;
  virtual int func_set_attribute(u64 fn, int attrib, int value) = 0;
  virtual int occupancy(u64 fn, int block_size, u64 dynamic_smem, unsigned flags, int& blocks) = 0;
  // dims: grid xyz, block xyz, shared memory, cluster xyz (cluster 0: none given).
  virtual int occupancy_clusters(u64 fn, const std::uint32_t dims[10], int& clusters) = 0;
  // `params` is the packed argument buffer (CU_LAUNCH_PARAM_BUFFER_POINTER).
  virtual int launch(u64 fn, const std::uint32_t grid[3], const std::uint32_t block[3], std::uint32_t shmem,
                     u64 stream, const void* params, std::size_t params_size) = 0;
  virtual int stream_create(unsigned flags, int priority, u64& stream) = 0;
  virtual int stream_destroy(u64 stream) = 0;
  virtual int stream_synchronize(u64 stream) = 0;
  virtual int stream_query(u64 stream) = 0;
  virtual int stream_wait_event(u64 stream, u64 event, unsigned flags) = 0;
  virtual int event_create(unsigned flags, u64& event) = 0;
  virtual int event_destroy(u64 event) = 0;
  virtual int event_record(u64 event, u64 stream) = 0;
  virtual int event_synchronize(u64 event) = 0;
  virtual int event_query(u64 event) = 0;
  virtual int event_elapsed(u64 start, u64 end, float& ms) = 0;
};

}  // namespace runsnack::cuda
