// The hidden driver tables cudart and the CUDA libraries request by UUID.
// Their layouts are undocumented; what each slot does was learned from
// open reimplementations' write-ups (ZLUDA's "dark API" notes and other
// public shims) and checked against this toolkit's static cudart with
// RUNSNACK_CUDA_TRACE=1. Only slots whose meaning is known are filled; a slot
// left null is one cudart tests for and skips. docs/CUDA.md lists them.
#include "cuda/shim/export_tables.hpp"

#include "cuda/shim/client.hpp"
#include "cuda/shim/integrity.hpp"
#include "cuda/wire.hpp"

#include <cuda.h>

#include <cstdint>
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace runsnack::cuda::shim {
namespace {

using Slot = const void*;

template <class F>
Slot fn(F* f) {
  return reinterpret_cast<Slot>(f);
}
// Entry 0 of most tables is the table's size in bytes.
template <std::size_t N>
Slot size_of_table() {
  return reinterpret_cast<Slot>(N * sizeof(void*));
}

// cudart's fatbin wrapper (magic 0x466243B1) around the image it registers.
CUresult module_from_wrapper(CUmodule* module, const void* wrapper) {
  if (module == nullptr || wrapper == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuModuleLoadData(module, wire::unwrap_fatbin(wrapper));
}

// ---- 6bd5fb6c-5bf4-e74a-8987-d93912fd9df9: the cudart interface ----
CUresult cudart_module_from_cubin(CUmodule* module, const void* wrapper) { return module_from_wrapper(module, wrapper); }
CUresult cudart_primary_context(CUcontext* ctx, CUdevice dev) { return cuDevicePrimaryCtxRetain(ctx, dev); }
CUresult cudart_module_from_cubin_ext1(CUmodule* module, const void* wrapper, void*, void*, unsigned) {
  return module_from_wrapper(module, wrapper);
}
void cudart_interface_notify(std::uintptr_t) {}  // a notification with nothing to do here
CUresult cudart_module_from_cubin_ext2(const void* fatbin, CUmodule* module, void*, void*, unsigned) {
  if (module == nullptr || fatbin == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return cuModuleLoadData(module, fatbin);
}
CUresult cudart_load_compilers() { return CUDA_SUCCESS; }  // the JIT lives on the provider

const Slot kCudartInterface[13] = {
    size_of_table<13>(), fn(cudart_module_from_cubin), fn(cudart_primary_context), nullptr, nullptr, nullptr,
    fn(cudart_module_from_cubin_ext1), fn(cudart_interface_notify), fn(cudart_module_from_cubin_ext2), nullptr,
    nullptr, nullptr, fn(cudart_load_compilers)};

// ---- a094798c-2e74-2e74-93f2-0800200c0a66: tools runtime callback hooks ----
// No profiler is attached on the consumer, so the hooks do nothing; the two
// buffers are scratch space cudart writes its callback state into.
void tools_event(unsigned, void*) {}
void tools_span(void*, void*) {}
template <std::size_t N>
void tools_buffer(void** ptr, std::size_t* size) {
  static std::uint8_t buffer[N];
  if (ptr != nullptr) *ptr = buffer;
  if (size != nullptr) *size = N;
}
const Slot kToolsHooks[7] = {size_of_table<7>(), fn(tools_event), fn(tools_buffer<1024>), nullptr, fn(tools_span),
                             nullptr, fn(tools_buffer<14>)};

// ---- 42d85a81-23f6-cb47-8298-f6e78a3aecdc: tools thread-local callbacks ----
void tools_tls_callback(void*) {}
const Slot kToolsTls[4] = {size_of_table<4>(), nullptr, fn(tools_tls_callback), nullptr};

// ---- c693336e-1121-df11-a8c3-68f355d89593: context-local storage ----
// cudart keeps its per-context state here. This table has no size entry.
struct Storage {
  std::mutex mutex;
  std::map<std::pair<std::uintptr_t, std::uintptr_t>, void*> values;
};
Storage& storage() {
  static auto* s = new Storage;
  return *s;
}
CUresult context_key(CUcontext ctx, std::uintptr_t& out) {
  if (ctx == nullptr && cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  out = reinterpret_cast<std::uintptr_t>(ctx);
  return CUDA_SUCCESS;
}
CUresult storage_put(CUcontext ctx, void* key, void* value, void*) {
  std::uintptr_t c = 0;
  if (auto rc = context_key(ctx, c); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(storage().mutex);
  storage().values[{c, reinterpret_cast<std::uintptr_t>(key)}] = value;
  return CUDA_SUCCESS;
}
CUresult storage_delete(CUcontext ctx, void* key) {
  std::uintptr_t c = 0;
  if (auto rc = context_key(ctx, c); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(storage().mutex);
  storage().values.erase({c, reinterpret_cast<std::uintptr_t>(key)});
  return CUDA_SUCCESS;
}
CUresult storage_get(void** value, CUcontext ctx, void* key) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uintptr_t c = 0;
  if (auto rc = context_key(ctx, c); rc != CUDA_SUCCESS) return rc;
  std::lock_guard lock(storage().mutex);
  auto it = storage().values.find({c, reinterpret_cast<std::uintptr_t>(key)});
  *value = it == storage().values.end() ? nullptr : it->second;
  return it == storage().values.end() ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS;
}
const Slot kContextStorage[4] = {fn(storage_put), fn(storage_delete), fn(storage_get), nullptr};

// ---- 263e8860-7cd2-6143-92f6-bbd5006dfa7e: context checks ----
CUresult context_check(CUcontext, unsigned* result, const void**) {
  if (result != nullptr) *result = 0;  // nothing to report about the context
  return CUDA_SUCCESS;
}
unsigned context_check_flags() { return 0; }
const Slot kContextChecks[4] = {size_of_table<4>(), nullptr, fn(context_check), fn(context_check_flags)};

// ---- d4082055-bde6-704b-8d34-ba123c66e1f2: the driver integrity check ----
CUresult integrity_check(unsigned version, std::uint64_t unix_seconds, std::uint64_t* result);
extern const Slot kIntegrity[3];
const Slot kIntegrity[3] = {size_of_table<3>(), fn(integrity_check), nullptr};

CUresult integrity_check(unsigned version, std::uint64_t unix_seconds, std::uint64_t* result) {
  if (result == nullptr) return CUDA_ERROR_INVALID_VALUE;
  IntegrityInput in;
  in.version = version;
  in.unix_seconds = unix_seconds;
  int driver = 0;
  cuDriverGetVersion(&driver);
  in.driver_version = static_cast<std::uint32_t>(driver);
  in.process = static_cast<std::uint32_t>(::getpid());
  in.thread = static_cast<std::uint32_t>(::pthread_self());
  in.integrity_table = kIntegrity;
  in.cudart_table = kCudartInterface;
  in.function = kIntegrity[1];
  int count = 0;
  if (auto rc = cuDeviceGetCount(&count); rc != CUDA_SUCCESS) return rc;
  for (int d = 0; d < count; ++d) {
    IntegrityDevice dev{};
    CUuuid uuid;
    cuDeviceGetUuid_v2(&uuid, d);
    std::memcpy(dev.uuid, uuid.bytes, 16);
    cuDeviceGetAttribute(&dev.pci_domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, d);
    cuDeviceGetAttribute(&dev.pci_bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d);
    cuDeviceGetAttribute(&dev.pci_device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, d);
    in.devices.push_back(dev);
  }
  integrity_digest(in, result);
  return CUDA_SUCCESS;
}

struct Known {
  std::uint8_t id[16];
  const Slot* table;
};
const Known kTables[] = {
    {{0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9}, kCudartInterface},
    {{0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66}, kToolsHooks},
    {{0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc}, kToolsTls},
    {{0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93}, kContextStorage},
    {{0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e}, kContextChecks},
    {{0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2}, kIntegrity},
};

// f8cff951-2146-8b4e-b9e2-fb469e7c0dd9 asks whether the driver offers a
// shortcut past cudart's normal start-up; answering NOT_FOUND keeps the normal
// path, which is the one this shim implements. Known, so not reported.
const std::uint8_t kSkipInitProbe[16] = {0xf8, 0xcf, 0xf9, 0x51, 0x21, 0x46, 0x8b, 0x4e,
                                         0xb9, 0xe2, 0xfb, 0x46, 0x9e, 0x7c, 0x0d, 0xd9};

}  // namespace

const void* export_table(const std::uint8_t id[16], bool& known) {
  known = true;
  for (const auto& k : kTables) {
    if (std::memcmp(k.id, id, 16) == 0) return k.table;
  }
  known = std::memcmp(kSkipInitProbe, id, 16) == 0;
  return nullptr;
}

}  // namespace runsnack::cuda::shim
