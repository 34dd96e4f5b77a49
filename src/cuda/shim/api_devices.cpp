// Driver API: initialisation and devices (answered from the Hello copy).
#include "cuda/shim/api_internal.hpp"

#include <cstdio>

namespace shim = runsnack::cuda::shim;
namespace wire = runsnack::cuda::wire;
using wire::Op;
using namespace runsnack::cuda::shim::api;

// A marker the server's DriverBackend looks for, so it never loads the shim as the driver.
extern "C" __attribute__((visibility("default"))) const char runsnack_cuda_shim_marker[] = "runsnack cuda shim";

// ---- initialisation and devices (answered from the Hello copy) ----
API cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return R(shim::init());
}
API cuDriverGetVersion(int* v) {
  if (v == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *v = shim::initialised() && shim::driver_version() > 0 ? shim::driver_version() : CUDA_VERSION;
  return CUDA_SUCCESS;
}
API cuDeviceGetCount(int* n) {
  if (n == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (auto rc = need_init(); rc != CUDA_SUCCESS) return rc;
  *n = static_cast<int>(shim::devices().size());
  return CUDA_SUCCESS;
}
API cuDeviceGet(CUdevice* dev, int ordinal) {
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (auto rc = device_ok(ordinal); rc != CUDA_SUCCESS) return rc;
  *dev = ordinal;
  return CUDA_SUCCESS;
}
API cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<std::size_t>(len), "%s", shim::devices()[static_cast<std::size_t>(dev)].name.c_str());
  return CUDA_SUCCESS;
}
API cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::memcpy(uuid->bytes, shim::devices()[static_cast<std::size_t>(dev)].uuid, 16);
  return CUDA_SUCCESS;
}
#undef cuDeviceGetUuid  // the pre-11.4 entry point under its own name
extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}
API cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = shim::devices()[static_cast<std::size_t>(dev)].total_mem;
  return CUDA_SUCCESS;
}
API cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto& a = shim::devices()[static_cast<std::size_t>(dev)].attributes;
  auto i = static_cast<std::size_t>(attrib);
  if (i >= a.size()) return CUDA_ERROR_INVALID_VALUE;
  *value = a[i];
  return CUDA_SUCCESS;
}
API cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  if (auto rc = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev); rc != CUDA_SUCCESS) return rc;
  return cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
}
API cuDeviceGetPCIBusId(char* id, int len, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  const auto& a = shim::devices()[static_cast<std::size_t>(dev)].attributes;
  std::snprintf(id, static_cast<std::size_t>(len), "%08x:%02x:%02x.0", a.size() > 50 ? a[50] : 0, a.size() > 33 ? a[33] : 0,
                a.size() > 34 ? a[34] : 0);
  return CUDA_SUCCESS;
}
API cuDeviceGetLuid(char*, unsigned int*, CUdevice) { return CUDA_ERROR_NOT_SUPPORTED; }  // Windows only
API cuDeviceCanAccessPeer(int* can, CUdevice, CUdevice) {
  if (can == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *can = 0;
  return need_init();
}
