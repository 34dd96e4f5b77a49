#pragma once
// NVML (the NVIDIA Management Library) loaded at run time with dlopen, so
// RunSnack builds and runs on machines without an NVIDIA driver: no NVML
// header or library is needed at build time. The few types and functions we
// use are declared here from NVML's documented C ABI.
//
// The library is libnvidia-ml.so.1 (installed with the driver), or the path
// in $RUNSNACK_NVML_LIBRARY when set (tests point it at a fake NVML). That
// variable loads code into the process; it is the user's own environment.
//
// Ownership: an Nvml holds the dlopen handle and one nvmlInit reference;
// the destructor calls nvmlShutdown and dlclose. Device handles are valid
// while their Nvml lives.
//
// Thread-safety: NVML is thread-safe and an Nvml has no mutable state after
// open(), so its const methods may be called from several threads.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace runsnack {

namespace nvml {
// nvmlReturn_t is a C enum: int-sized, NVML_SUCCESS = 0.
using Return = int;
inline constexpr Return kSuccess = 0;
// nvmlTemperatureSensors_t: NVML_TEMPERATURE_GPU = 0.
inline constexpr int kTemperatureGpu = 0;

struct DeviceHandle;  // nvmlDevice_st, opaque
using Device = DeviceHandle*;

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Utilization {  // nvmlUtilization_t, percent over the last sample period
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfoV1 {  // nvmlProcessInfo_v1_t: nvmlDeviceGetComputeRunningProcesses
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

struct ProcessInfo {  // nvmlProcessInfo_t (v2 layout): the _v2 and _v3 entry points
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// NVML_ERROR_INSUFFICIENT_SIZE; NVML_VALUE_NOT_AVAILABLE (e.g. usedGpuMemory without the right to see it).
inline constexpr Return kInsufficientSize = 7;
inline constexpr unsigned long long kValueNotAvailable = ~0ULL;

struct ProcessMemory {
  unsigned int pid;
  std::optional<unsigned long long> used_bytes;  // nullopt: NVML does not tell (another user's process)
};
}  // namespace nvml

// Environment variable that overrides the library path.
inline constexpr const char* kNvmlLibraryEnv = "RUNSNACK_NVML_LIBRARY";
inline constexpr const char* kNvmlDefaultLibrary = "libnvidia-ml.so.1";

class Nvml {
 public:
  // Loads the library and calls nvmlInit. Fails with `unsupported` when the
  // library cannot be loaded or lacks a required function (the message
  // names the library and dlerror()), `io_error` when nvmlInit fails (the
  // message carries nvmlErrorString, e.g. "Driver Not Loaded").
  static Result<std::unique_ptr<Nvml>> open();

  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml();

  // The path or name the library was loaded from.
  const std::string& library() const { return library_; }

  // Each call fails with `io_error` carrying NVML's message, or
  // `unsupported` when this NVML lacks the function.
  Result<std::string> driver_version() const;
  Result<int> cuda_driver_version() const;  // e.g. 12040 for CUDA 12.4
  Result<unsigned> device_count() const;
  Result<nvml::Device> device(unsigned index) const;
  Result<std::string> name(nvml::Device device) const;
  Result<std::string> uuid(nvml::Device device) const;
  Result<nvml::Memory> memory(nvml::Device device) const;
  Result<nvml::Utilization> utilization(nvml::Device device) const;
  Result<unsigned> temperature_c(nvml::Device device) const;
  // The compute processes (CUDA contexts) on `device` and the GPU memory each uses.
  Result<std::vector<nvml::ProcessMemory>> compute_processes(nvml::Device device) const;

  struct Functions;  // the resolved entry points (nvml.cpp)

 private:
  Nvml(void* handle, std::string library, std::unique_ptr<Functions> fns);
  Error nvml_error(nvml::Return rc, const char* what) const;

  void* handle_;
  std::string library_;
  std::unique_ptr<Functions> fns_;
};

}  // namespace runsnack
