#include "gpu/nvml.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <functional>
#include <cstdlib>

namespace runsnack {

using nvml::Device;
using nvml::Return;

struct Nvml::Functions {
  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*system_get_driver_version)(char*, unsigned) = nullptr;
  Return (*system_get_cuda_driver_version)(int*) = nullptr;
  Return (*device_get_count)(unsigned*) = nullptr;
  Return (*device_get_handle_by_index)(unsigned, Device*) = nullptr;
  Return (*device_get_name)(Device, char*, unsigned) = nullptr;
  Return (*device_get_uuid)(Device, char*, unsigned) = nullptr;
  Return (*device_get_memory_info)(Device, nvml::Memory*) = nullptr;
  Return (*device_get_utilization_rates)(Device, nvml::Utilization*) = nullptr;
  Return (*device_get_temperature)(Device, int, unsigned*) = nullptr;
  Return (*device_get_compute_processes)(Device, unsigned*, nvml::ProcessInfo*) = nullptr;
  Return (*device_get_compute_processes_v1)(Device, unsigned*, nvml::ProcessInfoV1*) = nullptr;
};

namespace {

// Larger than NVML's own limits (96 for names and UUIDs, 80 for versions).
constexpr unsigned kNvmlStringBuffer = 256;

// The first of `names` the library exports: the _v2 entry points are the
// current ABI; the plain names are for old drivers.
template <class Fn>
void resolve(void* handle, Fn& out, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    if (void* sym = ::dlsym(handle, name)) {
      out = reinterpret_cast<Fn>(sym);
      return;
    }
  }
}

std::string library_path() {
  const char* env = std::getenv(kNvmlLibraryEnv);
  return env && *env ? env : kNvmlDefaultLibrary;
}

}  // namespace

Result<std::unique_ptr<Nvml>> Nvml::open() {
  std::string library = library_path();
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    // A missing file is the ordinary CPU-only case; anything else (wrong
    // architecture, missing dependency) is worth showing as dlerror says it.
    const char* why = ::dlerror();
    std::string reason = why ? why : "";
    if (reason.empty() || reason.find("No such file") != std::string::npos)
      return fail(errc::unsupported, library + " not found");
    return fail(errc::unsupported, library + " could not be loaded: " + reason);
  }
  auto fns = std::make_unique<Functions>();
  resolve(handle, fns->init, {"nvmlInit_v2", "nvmlInit"});
  resolve(handle, fns->shutdown, {"nvmlShutdown"});
  resolve(handle, fns->error_string, {"nvmlErrorString"});
  resolve(handle, fns->system_get_driver_version, {"nvmlSystemGetDriverVersion"});
  resolve(handle, fns->system_get_cuda_driver_version,
          {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"});
  resolve(handle, fns->device_get_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"});
  resolve(handle, fns->device_get_handle_by_index,
          {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  resolve(handle, fns->device_get_name, {"nvmlDeviceGetName"});
  resolve(handle, fns->device_get_uuid, {"nvmlDeviceGetUUID"});
  resolve(handle, fns->device_get_memory_info, {"nvmlDeviceGetMemoryInfo"});
  resolve(handle, fns->device_get_utilization_rates, {"nvmlDeviceGetUtilizationRates"});
  resolve(handle, fns->device_get_temperature, {"nvmlDeviceGetTemperature"});
  resolve(handle, fns->device_get_compute_processes,
          {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  if (!fns->device_get_compute_processes)
    resolve(handle, fns->device_get_compute_processes_v1, {"nvmlDeviceGetComputeRunningProcesses"});

  // Without these there is nothing to report; the rest are optional.
  if (!fns->init || !fns->shutdown || !fns->device_get_count || !fns->device_get_handle_by_index) {
    ::dlclose(handle);
    return fail(errc::unsupported, library + " is not a usable NVML (missing nvmlInit or device functions)");
  }
  // From here the Nvml owns the handle, so every exit path closes it.
  std::unique_ptr<Nvml> nvml(new Nvml(handle, library, std::move(fns)));
  if (Return rc = nvml->fns_->init(); rc != nvml::kSuccess) {
    Error e = nvml->nvml_error(rc, "NVML initialisation failed");
    nvml->fns_->init = nullptr;  // tells the destructor not to call nvmlShutdown
    return e;
  }
  return nvml;
}

Nvml::Nvml(void* handle, std::string library, std::unique_ptr<Functions> fns)
    : handle_(handle), library_(std::move(library)), fns_(std::move(fns)) {}

Nvml::~Nvml() {
  if (fns_->init) fns_->shutdown();
  ::dlclose(handle_);
}

Error Nvml::nvml_error(Return rc, const char* what) const {
  const char* text = fns_->error_string ? fns_->error_string(rc) : nullptr;
  return Error(errc::io_error,
               std::string(what) + ": " + (text ? std::string(text) : "NVML error " + std::to_string(rc)));
}

namespace {
Error missing(const char* fn) { return fail(errc::unsupported, std::string("this NVML has no ") + fn); }

// NVML terminates its strings, but a bad library must not make us read past the buffer.
std::string terminated(std::array<char, kNvmlStringBuffer>& buf) {
  buf.back() = '\0';
  return std::string(buf.data());
}
}  // namespace

Result<std::string> Nvml::driver_version() const {
  if (!fns_->system_get_driver_version) return missing("nvmlSystemGetDriverVersion");
  std::array<char, kNvmlStringBuffer> buf{};
  if (Return rc = fns_->system_get_driver_version(buf.data(), kNvmlStringBuffer); rc != nvml::kSuccess)
    return nvml_error(rc, "driver version");
  return terminated(buf);
}

Result<int> Nvml::cuda_driver_version() const {
  if (!fns_->system_get_cuda_driver_version) return missing("nvmlSystemGetCudaDriverVersion");
  int version = 0;
  if (Return rc = fns_->system_get_cuda_driver_version(&version); rc != nvml::kSuccess)
    return nvml_error(rc, "CUDA driver version");
  return version;
}

Result<unsigned> Nvml::device_count() const {
  unsigned count = 0;
  if (Return rc = fns_->device_get_count(&count); rc != nvml::kSuccess) return nvml_error(rc, "device count");
  return count;
}

Result<Device> Nvml::device(unsigned index) const {
  Device device = nullptr;
  if (Return rc = fns_->device_get_handle_by_index(index, &device); rc != nvml::kSuccess)
    return nvml_error(rc, "device handle");
  return device;
}

Result<std::string> Nvml::name(Device device) const {
  if (!fns_->device_get_name) return missing("nvmlDeviceGetName");
  std::array<char, kNvmlStringBuffer> buf{};
  if (Return rc = fns_->device_get_name(device, buf.data(), kNvmlStringBuffer); rc != nvml::kSuccess)
    return nvml_error(rc, "device name");
  return terminated(buf);
}

Result<std::string> Nvml::uuid(Device device) const {
  if (!fns_->device_get_uuid) return missing("nvmlDeviceGetUUID");
  std::array<char, kNvmlStringBuffer> buf{};
  if (Return rc = fns_->device_get_uuid(device, buf.data(), kNvmlStringBuffer); rc != nvml::kSuccess)
    return nvml_error(rc, "device UUID");
  return terminated(buf);
}

Result<nvml::Memory> Nvml::memory(Device device) const {
  if (!fns_->device_get_memory_info) return missing("nvmlDeviceGetMemoryInfo");
  nvml::Memory memory{};
  if (Return rc = fns_->device_get_memory_info(device, &memory); rc != nvml::kSuccess)
    return nvml_error(rc, "device memory");
  return memory;
}

Result<nvml::Utilization> Nvml::utilization(Device device) const {
  if (!fns_->device_get_utilization_rates) return missing("nvmlDeviceGetUtilizationRates");
  nvml::Utilization utilization{};
  if (Return rc = fns_->device_get_utilization_rates(device, &utilization); rc != nvml::kSuccess)
    return nvml_error(rc, "device utilisation");
  return utilization;
}

Result<unsigned> Nvml::temperature_c(Device device) const {
  if (!fns_->device_get_temperature) return missing("nvmlDeviceGetTemperature");
  unsigned celsius = 0;
  if (Return rc = fns_->device_get_temperature(device, nvml::kTemperatureGpu, &celsius); rc != nvml::kSuccess)
    return nvml_error(rc, "device temperature");
  return celsius;
}

namespace {

// Calls `fn` with a buffer that grows once to the count NVML asks for (processes come and go
// between the calls: then the second call may still be short, and the processes are unknown).
template <class Info, class Fn>
Result<std::vector<nvml::ProcessMemory>> list_processes(Fn fn, Device device,
                                                        const std::function<Error(Return)>& error) {
  constexpr unsigned kMaxProcesses = 4096;
  std::vector<Info> infos(64);
  unsigned count = static_cast<unsigned>(infos.size());
  Return rc = fn(device, &count, infos.data());
  if (rc == nvml::kInsufficientSize && count > infos.size()) {
    infos.resize(std::min(count + 16, kMaxProcesses));
    count = static_cast<unsigned>(infos.size());
    rc = fn(device, &count, infos.data());
  }
  if (rc != nvml::kSuccess) return error(rc);
  std::vector<nvml::ProcessMemory> out;
  for (unsigned i = 0; i < std::min<std::size_t>(count, infos.size()); ++i) {
    const auto used = infos[i].usedGpuMemory;
    out.push_back({infos[i].pid, used == nvml::kValueNotAvailable ? std::nullopt : std::optional(used)});
  }
  return out;
}

}  // namespace

Result<std::vector<nvml::ProcessMemory>> Nvml::compute_processes(Device device) const {
  auto error = [this](Return rc) { return nvml_error(rc, "compute processes"); };
  if (fns_->device_get_compute_processes)
    return list_processes<nvml::ProcessInfo>(fns_->device_get_compute_processes, device, error);
  if (fns_->device_get_compute_processes_v1)
    return list_processes<nvml::ProcessInfoV1>(fns_->device_get_compute_processes_v1, device, error);
  return missing("nvmlDeviceGetComputeRunningProcesses");
}

}  // namespace runsnack
