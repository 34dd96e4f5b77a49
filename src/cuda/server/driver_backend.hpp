// A Backend on the machine's real CUDA driver, loaded with dlopen at run
// time (no build-time dependency). It refuses any libcuda.so.1 that exports
// runsnack_cuda_shim_marker, so a server never loads our own shim.
#pragma once

#include "cuda/server/backend.hpp"

#include <memory>
#include <optional>
#include <string>

namespace runsnack::cuda {

// Where the real driver is, searched as DriverBackend::init does (never our
// shim); nothing when the machine has none.
std::optional<std::string> find_real_driver();

class DriverBackend : public Backend {
 public:
  DriverBackend();
  ~DriverBackend() override;

  int init() override;
  int driver_version(int& version) override;
  int devices(std::vector<wire::DeviceInfo>& out) override;
  int primary_ctx_retain(int dev, u64& ctx) override;
  int primary_ctx_release(int dev) override;
  int ctx_create(unsigned flags, int dev, u64& ctx) override;
  int ctx_destroy(u64 ctx) override;
  int set_current(u64 ctx) override;
  int ctx_synchronize() override;
  int mem_alloc(u64 size, u64& dptr) override;
  int mem_free(u64 dptr) override;
  int mem_get_info(u64& free, u64& total) override;
  int memcpy_htod(u64 dst, const void* src, u64 n, u64 stream) override;
  int memcpy_dtoh(void* dst, u64 src, u64 n, u64 stream) override;
  int memcpy_dtod(u64 dst, u64 src, u64 n, u64 stream) override;
  int memset(u64 dst, std::uint32_t value, std::uint32_t elem, u64 count, u64 stream) override;
  int module_load(const void* image, std::size_t size, u64& module) override;
  int module_unload(u64 module) override;
  int module_get_function(u64 module, const std::string& name, u64& fn) override;
  int module_get_global(u64 module, const std::string& name, u64& dptr, u64& size) override;
  int library_load(const void* image, std::size_t size, u64& library) override;
  int library_unload(u64 library) override;
  int library_get_kernel(u64 library, const std::string& name, u64& kernel) override;
  int library_get_global(u64 library, const std::string& name, u64& dptr, u64& size) override;
  int kernel_get_function(u64 kernel, u64& fn) override;
  int param_info(u64 fn, bool is_kernel, std::vector<wire::Param>& out) override;
  int func_get_attribute(u64 fn, int attrib, int& value) override;
  int func_set_attribute(u64 fn, int attrib, int value) override;
  int occupancy(u64 fn, int block_size, u64 dynamic_smem, unsigned flags, int& blocks) override;
  int occupancy_clusters(u64 fn, const std::uint32_t dims[10], int& clusters) override;
  int launch(u64 fn, const std::uint32_t grid[3], const std::uint32_t block[3], std::uint32_t shmem, u64 stream,
             const void* params, std::size_t params_size) override;
  int stream_create(unsigned flags, int priority, u64& stream) override;
  int stream_destroy(u64 stream) override;
  int stream_synchronize(u64 stream) override;
  int stream_query(u64 stream) override;
  int stream_wait_event(u64 stream, u64 event, unsigned flags) override;
  int event_create(unsigned flags, u64& event) override;
  int event_destroy(u64 event) override;
  int event_record(u64 event, u64 stream) override;
  int event_synchronize(u64 event) override;
  int event_query(u64 event) override;
  int event_elapsed(u64 start, u64 end, float& ms) override;

  struct Api;

 private:
  std::unique_ptr<Api> api_;
};

}  // namespace runsnack::cuda
