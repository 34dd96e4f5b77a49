// A Backend that keeps "device" memory in host RAM. A TEST TOOL ONLY:
// memory, copies, memset, modules, streams and events are recorded and
// behave; a kernel launch is recorded and executed only for the test
// programs' own kernels (host_kernels.hpp); any other launch answers
// CUDA_ERROR_NOT_SUPPORTED, so nothing built on it may claim to run kernels.
//
// A provider uses it where there is no GPU (RUNSNACK_CUDA_BACKEND=host), so a
// client may drive it as hard as a real GPU, with no --memory behind it: what
// it holds is bounded as a GPU's memory bounds the real backend (kTotalMemory),
// and its call log keeps only its newest lines (kMaxCallLogBytes).
#pragma once

#include "cuda/server/backend.hpp"

#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace runsnack::cuda {

class HostBackend : public Backend {
 public:
  static constexpr const char* kDeviceName = "RunSnack HostBackend (test double, runs only its test kernels)";
  // The double's device memory, which everything it holds for its client is charged against:
  // allocations (rounded up to kAlign), module globals, and each context, module, function,
  // library, kernel, stream and event with its name. Past it, CUDA_ERROR_OUT_OF_MEMORY, as a
  // GPU's memory bounds the real backend. A session runs at most 16 servers
  // (kMaxServersPerSession, services/cuda/cuda_service.hpp), which share one GPU on the real
  // backend: 16 x 256 MiB = 4 GiB of host RAM per session, one GPU of 4 GiB. (64 MiB was too
  // small: cuBLAS's initialisation, sized from the device's memory, failed about every other run.)
  static constexpr std::uint64_t kTotalMemory = 256ull << 20;
  static constexpr std::uint64_t kGlobalSize = 64 * 1024;
  static constexpr std::uint64_t kAlign = 256;
  // What one handle costs besides its name (the host's bookkeeping; a GPU's costs device memory).
  static constexpr std::uint64_t kHandleCost = kAlign;
  // The call log keeps its newest lines up to this many bytes; a launch's line shows at most the
  // first kMaxLoggedParams bytes of its arguments (in hex, twice the bytes sent).
  static constexpr std::size_t kMaxCallLogBytes = 1u << 20;
  static constexpr std::size_t kMaxLoggedParams = 256;

  // The newest calls, one line each, e.g. "mem_alloc 4096", for tests to check the order.
  std::vector<std::string> calls() const;

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

 private:
  // A handle's name (a function's or kernel's; else what it is) and what made it (0: nothing).
  struct Named {
    std::string name;
    u64 owner = 0;
  };
  using Handles = std::map<u64, Named>;

  void record(std::string line);
  // Takes `bytes` of the device memory; false (nothing taken) when they are not left.
  bool charge(u64 bytes);
  // The host bytes behind [p, p + n) inside one allocation, or nullptr.
  std::uint8_t* span(u64 p, u64 n);
  int global(u64 owner, const std::string& name, u64& dptr, u64& size);
  int new_handle(Handles& into, std::string name, u64 owner, u64& handle);
  int named_handle(Handles& into, const std::string& name, u64 owner, u64& handle);
  int drop(Handles& from, u64 h, const char* what);
  // Frees what a module or library holds: its functions or kernels (and theirs), its globals.
  void drop_owned(u64 owner);

  mutable std::mutex mutex_;
  std::deque<std::string> calls_;
  std::size_t calls_bytes_ = 0;
  std::map<u64, std::vector<std::uint8_t>> memory_;  // fake device address -> bytes
  // Far from where Linux maps a process's heap, stack and libraries, so the
  // shim can reserve the same range in the client.
  u64 next_address_ = 0x5e0000000000;
  u64 used_ = 0;  // of kTotalMemory
  u64 next_handle_ = 0xd0000;
  bool initialised_ = false;
  int primary_retains_ = 0;
  std::map<std::pair<u64, std::string>, u64> globals_;  // (owner, name) -> address
  Handles contexts_, modules_, functions_, libraries_, kernels_, streams_, events_;
  std::map<std::pair<u64, std::string>, u64> by_name_;  // (owner, name) -> function or kernel
};

}  // namespace runsnack::cuda
