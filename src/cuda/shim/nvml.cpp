// libnvidia-ml.so.1 for programs run through the shim: answers the device
// queries tools and frameworks make (count, name, UUID, PCI, memory) from the
// remote device, through the driver shim's own connection. Anything else is
// NVML_ERROR_NOT_SUPPORTED, logged once.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define NVML extern "C" __attribute__((visibility("default"))) int

namespace {

// nvml.h's values and structures (a stable ABI; the toolkit ships no nvml.h).
enum : int {
  kOk = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNotFound = 6,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kUnknown = 999,
};
struct Memory {
  unsigned long long total, free, used;
};
struct PciInfo {
  char bus_id_legacy[16];
  unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct Device {
  int index;
};
Device g_devices[64];

int ready(int& count) {
  if (cuInit(0) != CUDA_SUCCESS) return kDriverNotLoaded;
  if (cuDeviceGetCount(&count) != CUDA_SUCCESS) return kUnknown;
  return kOk;
}
int index_of(void* handle, int& index) {
  int count = 0;
  if (int rc = ready(count); rc != kOk) return rc;
  auto* d = static_cast<Device*>(handle);
  if (d < g_devices || d >= g_devices + 64 || d->index >= count) return kInvalidArgument;
  index = d->index;
  return kOk;
}
int copy_string(const char* s, char* out, unsigned len) {
  if (out == nullptr) return kInvalidArgument;
  if (std::strlen(s) + 1 > len) return kInsufficientSize;
  std::memcpy(out, s, std::strlen(s) + 1);
  return kOk;
}

// Loud once per name; fatal under RUNSNACK_CUDA_STRICT=1, like the driver shim.
int not_forwarded(bool& said, const char* name) {
  if (!said) {
    said = true;
    std::fprintf(stderr, "runsnack cuda: NVML query not forwarded yet, returning NVML_ERROR_NOT_SUPPORTED: %s\n", name);
    const char* strict = std::getenv("RUNSNACK_CUDA_STRICT");
    if (strict != nullptr && std::strcmp(strict, "1") == 0) std::abort();
  }
  return kNotSupported;
}

}  // namespace

NVML nvmlInit_v2() {
  int count = 0;
  return ready(count);
}
NVML nvmlInit() { return nvmlInit_v2(); }
NVML nvmlInitWithFlags(unsigned) { return nvmlInit_v2(); }
NVML nvmlShutdown() { return kOk; }
extern "C" __attribute__((visibility("default"))) const char* nvmlErrorString(int rc) {
  switch (rc) {
    case kOk: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported (by RunSnack's remote NVML)";
    case kNotFound: return "Not Found";
    case kInsufficientSize: return "Insufficient Size";
    case kDriverNotLoaded: return "Driver Not Loaded (no remote GPU: use `runsnack cuda LINK -- CMD`)";
    default: return "Unknown Error";
  }
}
NVML nvmlSystemGetCudaDriverVersion(int* v) {
  if (v == nullptr) return kInvalidArgument;
  return cuDriverGetVersion(v) == CUDA_SUCCESS ? kOk : kUnknown;
}
NVML nvmlSystemGetCudaDriverVersion_v2(int* v) { return nvmlSystemGetCudaDriverVersion(v); }
NVML nvmlSystemGetDriverVersion(char* out, unsigned len) {
  int v = 0;
  cuDriverGetVersion(&v);
  char s[64];
  std::snprintf(s, sizeof s, "remote (CUDA %d.%d)", v / 1000, v % 1000 / 10);
  return copy_string(s, out, len);
}
NVML nvmlSystemGetNVMLVersion(char* out, unsigned len) { return copy_string("runsnack-remote", out, len); }
NVML nvmlDeviceGetCount_v2(unsigned* n) {
  if (n == nullptr) return kInvalidArgument;
  int count = 0;
  if (int rc = ready(count); rc != kOk) return rc;
  *n = static_cast<unsigned>(count);
  return kOk;
}
NVML nvmlDeviceGetCount(unsigned* n) { return nvmlDeviceGetCount_v2(n); }
NVML nvmlDeviceGetHandleByIndex_v2(unsigned i, void** handle) {
  int count = 0;
  if (int rc = ready(count); rc != kOk) return rc;
  if (handle == nullptr || i >= static_cast<unsigned>(count) || i >= 64) return kInvalidArgument;
  g_devices[i].index = static_cast<int>(i);
  *handle = &g_devices[i];
  return kOk;
}
NVML nvmlDeviceGetHandleByIndex(unsigned i, void** handle) { return nvmlDeviceGetHandleByIndex_v2(i, handle); }
NVML nvmlDeviceGetIndex(void* handle, unsigned* i) {
  int index = 0;
  if (int rc = index_of(handle, index); rc != kOk) return rc;
  if (i == nullptr) return kInvalidArgument;
  *i = static_cast<unsigned>(index);
  return kOk;
}
NVML nvmlDeviceGetName(void* handle, char* out, unsigned len) {
  int index = 0;
  if (int rc = index_of(handle, index); rc != kOk) return rc;
  char name[256];
  cuDeviceGetName(name, sizeof name, index);
  return copy_string(name, out, len);
}
NVML nvmlDeviceGetUUID(void* handle, char* out, unsigned len) {
  int index = 0;
  if (int rc = index_of(handle, index); rc != kOk) return rc;
  CUuuid u;
  cuDeviceGetUuid_v2(&u, index);
  auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return copy_string(s, out, len);
}
NVML nvmlDeviceGetMemoryInfo(void* handle, Memory* m) {
  int index = 0;
  if (int rc = index_of(handle, index); rc != kOk) return rc;
  if (m == nullptr) return kInvalidArgument;
  // The figure the provider's driver gives inside its primary context.
  CUcontext ctx = nullptr;
  if (cuDevicePrimaryCtxRetain(&ctx, index) != CUDA_SUCCESS) return kUnknown;
  cuCtxPushCurrent(ctx);
  size_t free = 0, total = 0;
  CUresult rc = cuMemGetInfo(&free, &total);
  cuCtxPopCurrent(&ctx);
  cuDevicePrimaryCtxRelease(index);
  if (rc != CUDA_SUCCESS) return kUnknown;
  m->total = total, m->free = free, m->used = total - free;
  return kOk;
}
NVML nvmlDeviceGetPciInfo_v3(void* handle, PciInfo* p) {
  int index = 0;
  if (int rc = index_of(handle, index); rc != kOk) return rc;
  if (p == nullptr) return kInvalidArgument;
  std::memset(p, 0, sizeof *p);
  int domain = 0, bus = 0, device = 0;
  cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, index);
  cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, index);
  cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, index);
  p->domain = static_cast<unsigned>(domain), p->bus = static_cast<unsigned>(bus), p->device = static_cast<unsigned>(device);
  std::snprintf(p->bus_id, sizeof p->bus_id, "%08x:%02x:%02x.0", p->domain, p->bus, p->device);
  std::snprintf(p->bus_id_legacy, sizeof p->bus_id_legacy, "%04x:%02x:%02x.0", p->domain & 0xffff, p->bus, p->device);
  return kOk;
}
NVML nvmlDeviceGetPciInfo_v2(void* handle, PciInfo* p) { return nvmlDeviceGetPciInfo_v3(handle, p); }
NVML nvmlDeviceGetPciInfo(void* handle, PciInfo* p) { return nvmlDeviceGetPciInfo_v3(handle, p); }
NVML nvmlDeviceGetCudaComputeCapability(void* handle, int* major, int* minor) {
  int index = 0;
  if (int rc = index_of(handle, index); rc != kOk) return rc;
  if (major == nullptr || minor == nullptr) return kInvalidArgument;
  cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, index);
  cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, index);
  return kOk;
}
// Live telemetry is not forwarded yet (docs/CUDA.md).
NVML nvmlDeviceGetUtilizationRates(void*, void*) {
  static bool said = false;
  return not_forwarded(said, "nvmlDeviceGetUtilizationRates");
}
NVML nvmlDeviceGetTemperature(void*, int, unsigned*) {
  static bool said = false;
  return not_forwarded(said, "nvmlDeviceGetTemperature");
}
