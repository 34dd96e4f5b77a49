// The driver API entry points the shim implements. Each one is exported under
// the exact (versioned) name cuda.h maps it to; the generated table
// (proc_table.c) gives every other name a loud CUDA_ERROR_NOT_SUPPORTED stub.
#include "cuda/shim/client.hpp"

#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#define API extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI

namespace shim = runsnack::cuda::shim;
namespace wire = runsnack::cuda::wire;
using wire::Op;

namespace {

template <class T>
std::uint64_t u(T* p) {
  return reinterpret_cast<std::uintptr_t>(p);
}
template <class T>
T as(std::uint64_t v) {
  return reinterpret_cast<T>(static_cast<std::uintptr_t>(v));
}
std::uint64_t read_u64(const std::vector<std::uint8_t>& r, std::size_t at = 0) {
  std::uint64_t v = 0;
  if (r.size() >= at + 8) std::memcpy(&v, r.data() + at, 8);
  return v;
}
CUresult R(int rc) { return static_cast<CUresult>(rc); }

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
Local& local() {
  static Local* l = new Local;
  return *l;
}

void reserve(std::uint64_t p, std::uint64_t size, bool on) {
  constexpr std::uint64_t kPage = 4096;
  std::uint64_t begin = (p + kPage - 1) / kPage * kPage, end = (p + size) / kPage * kPage;
  if (end <= begin) return;
  void* want = as<void*>(begin);
  if (!on) {
    ::munmap(want, end - begin);
    return;
  }
  void* got = ::mmap(want, end - begin, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
  if (got == want) return;
  if (got != MAP_FAILED) ::munmap(got, end - begin);
  shim::warn_once("device addresses overlap this process's memory (cuMemcpy may misjudge a direction)", "cuMemAlloc");
}

bool is_device(std::uint64_t p) {
  auto& l = local();
  std::lock_guard lock(l.mutex);
  auto it = l.allocations.upper_bound(p);
  if (it == l.allocations.begin()) return false;
  --it;
  return p - it->first < it->second;
}

int device_of(std::uint64_t ctx) {
  auto& l = local();
  std::lock_guard lock(l.mutex);
  for (auto& [dev, h] : l.primary) {
    if (h == ctx) return dev;
  }
  if (auto it = l.contexts.find(ctx); it != l.contexts.end()) return it->second;
  return 0;
}

CUresult need_init() { return shim::initialised() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED; }

CUresult device_ok(CUdevice dev) {
  if (!shim::initialised()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || static_cast<std::size_t>(dev) >= shim::devices().size()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// Keeps the parameter layout that follows the handle in a lookup's reply.
void read_params(const std::vector<std::uint8_t>& reply, std::uint64_t handle) {
  if (reply.size() < 8) return;
  wire::Reader r(reply.data() + 8, reply.size() - 8);
  auto params = r.array<wire::Param>(wire::kMaxParams);
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.params[handle] = std::move(params);
}

// Streams a (per-thread) default stream request maps to.
std::uint64_t stream_of(CUstream s, bool per_thread) {
  std::uint64_t v = u(s);
  return v == 0 && per_thread ? 2 : v;  // CU_STREAM_PER_THREAD
}

CUresult htod(std::uint64_t dst, const void* src, std::size_t n, std::uint64_t stream) {
  auto* p = static_cast<const std::uint8_t*>(src);
  std::uint64_t ctx = shim::current_ctx();
  for (std::size_t off = 0; off < n; off += wire::kChunk) {
    std::size_t len = std::min(wire::kChunk, n - off);
    int rc = shim::post(Op::MemcpyHtoD, [&](wire::Writer& w) {
      w.u64(ctx), w.u64(dst + off), w.u64(stream), w.raw(p + off, len);
    });
    if (rc != 0) return R(rc);
  }
  return CUDA_SUCCESS;
}

// Up to kWindow chunk requests travel together (one round trip per 64 MiB);
// the window bounds what waits in the socket buffers, so neither side blocks.
CUresult dtoh(void* dst, std::uint64_t src, std::size_t n, std::uint64_t stream) {
  constexpr std::size_t kWindow = 64;
  auto* p = static_cast<std::uint8_t*>(dst);
  std::uint64_t ctx = shim::current_ctx();
  for (std::size_t base = 0; base < n; base += kWindow * wire::kChunk) {
    std::size_t chunks = std::min(kWindow, (n - base + wire::kChunk - 1) / wire::kChunk);
    bool short_reply = false;
    int rc = shim::call_many(
        Op::MemcpyDtoH, chunks,
        [&](std::size_t i, wire::Writer& w) {
          std::size_t off = base + i * wire::kChunk;
          w.u64(ctx), w.u64(src + off), w.u64(std::min(wire::kChunk, n - off)), w.u64(stream);
        },
        [&](std::size_t i, const std::vector<std::uint8_t>& reply) {
          std::size_t off = base + i * wire::kChunk;
          std::size_t len = std::min(wire::kChunk, n - off);
          if (reply.size() != len) short_reply = true;
          else std::memcpy(p + off, reply.data(), len);
        });
    if (rc != 0) return R(rc);
    if (short_reply) return CUDA_ERROR_UNKNOWN;
  }
  return CUDA_SUCCESS;
}

CUresult dtod(std::uint64_t dst, std::uint64_t src, std::size_t n, std::uint64_t stream) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::MemcpyDtoD, [&](wire::Writer& w) {
    w.u64(ctx), w.u64(dst), w.u64(src), w.u64(n), w.u64(stream);
  }));
}

// cuMemcpy with unified addressing: the direction follows from which side
// each pointer lives on. Host-to-host copies never leave this process.
CUresult copy_any(std::uint64_t dst, std::uint64_t src, std::size_t n, std::uint64_t stream) {
  bool d = is_device(dst), s = is_device(src);
  if (d && s) return dtod(dst, src, n, stream);
  if (d) return htod(dst, as<const void*>(src), n, stream);
  if (s) return dtoh(as<void*>(dst), src, n, stream);
  std::memmove(as<void*>(dst), as<const void*>(src), n);
  return CUDA_SUCCESS;
}

CUresult memset_any(CUdeviceptr dst, std::uint32_t value, std::uint32_t elem, std::size_t count, std::uint64_t stream) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::Memset, [&](wire::Writer& w) {
    w.u64(ctx), w.u64(dst), w.u32(value), w.u32(elem), w.u64(count), w.u64(stream);
  }));
}

CUresult sync_stream(std::uint64_t stream) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::call(Op::StreamSynchronize, [&](wire::Writer& w) { w.u64(ctx), w.u64(stream); }));
}

// Sends a whole module image (fatbin, cubin or PTX) to the server, where the
// next ModuleLoad or LibraryLoad takes it.
CUresult upload(const void* image) {
  if (auto rc = need_init(); rc != CUDA_SUCCESS) return rc;
  std::size_t size = wire::image_size(image);
  if (size == 0) return CUDA_ERROR_INVALID_IMAGE;
  return R(shim::upload_image(wire::unwrap_fatbin(image), size));
}

// A ModuleGetGlobal/LibraryGetGlobal reply: the global's address and size; a
// global is device memory too.
CUresult take_global(const std::vector<std::uint8_t>& reply, CUdeviceptr* p, size_t* size) {
  if (p != nullptr) *p = read_u64(reply);
  if (size != nullptr) *size = read_u64(reply, 8);
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.allocations[read_u64(reply)] = read_u64(reply, 8);
  return CUDA_SUCCESS;
}

CUresult load_module(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (auto rc = upload(image); rc != CUDA_SUCCESS) return rc;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::ModuleLoad, [&](wire::Writer& w) { w.u64(ctx); }, &reply);
  if (rc == 0) *module = as<CUmodule>(read_u64(reply));
  return R(rc);
}

CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3], unsigned shmem, std::uint64_t stream,
                void** params, void** extra) {
  if (auto rc = need_init(); rc != CUDA_SUCCESS) return rc;
  std::vector<std::uint8_t> buf;
  if (extra != nullptr) {
    // CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE: already packed by the caller.
    const void* ptr = nullptr;
    std::size_t size = 0;
    for (void** e = extra; *e != CU_LAUNCH_PARAM_END; e += 2) {
      if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) ptr = e[1];
      else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) size = *static_cast<std::size_t*>(e[1]);
      else return CUDA_ERROR_INVALID_VALUE;
    }
    if (ptr == nullptr && size > 0) return CUDA_ERROR_INVALID_VALUE;
    auto* b = static_cast<const std::uint8_t*>(ptr);
    buf.assign(b, b + size);
  } else {
    auto& l = local();
    std::lock_guard lock(l.mutex);
    auto it = l.params.find(u(f));
    if (it == l.params.end()) return CUDA_ERROR_INVALID_HANDLE;
    std::size_t size = 0;
    for (const auto& p : it->second) size = std::max<std::size_t>(size, p.offset + p.size);
    buf.assign(size, 0);
    if (!it->second.empty() && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t i = 0; i < it->second.size(); ++i) {
      std::memcpy(buf.data() + it->second[i].offset, params[i], it->second[i].size);
    }
  }
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::Launch, [&](wire::Writer& w) {
    w.u64(ctx), w.u64(u(f));
    for (int i = 0; i < 3; ++i) w.u32(grid[i]);
    for (int i = 0; i < 3; ++i) w.u32(block[i]);
    w.u32(shmem), w.u64(stream), w.raw(buf.data(), buf.size());
  }));
}

CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** params, void** extra, bool per_thread) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "launch attribute %d (ignored)", static_cast<int>(c->attrs[i].id));
    shim::warn_once("cuLaunchKernelEx", name);
  }
  unsigned grid[3] = {c->gridDimX, c->gridDimY, c->gridDimZ}, block[3] = {c->blockDimX, c->blockDimY, c->blockDimZ};
  return launch(f, grid, block, c->sharedMemBytes, stream_of(c->hStream, per_thread), params, extra);
}

}  // namespace

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

// ---- contexts ----
API cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::PrimaryCtxRetain, [&](wire::Writer& w) { w.i32(dev); }, &reply);
  if (rc != 0) return R(rc);
  *ctx = as<CUcontext>(read_u64(reply));
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.primary[dev] = u(*ctx);
  return CUDA_SUCCESS;
}
API cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  return R(shim::post(Op::PrimaryCtxRelease, [&](wire::Writer& w) { w.i32(dev); }));
}
API cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& l = local();
  std::lock_guard lock(l.mutex);
  *flags = l.primary_flags[dev];
  *active = l.primary.count(dev) ? 1 : 0;
  return CUDA_SUCCESS;
}
API cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.primary_flags[dev] = flags;  // scheduling flags only steer the provider's CPU spin; kept as a record
  return CUDA_SUCCESS;
}
API cuDevicePrimaryCtxReset_v2(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }
// The pre-11.0 entry points differ from _v2 only in what they do to a primary
// context still in use by others, which a remote context never is.
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuDevicePrimaryCtxSetFlags
API cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }
API cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }
API cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) { return cuDevicePrimaryCtxSetFlags_v2(dev, flags); }
// cuCtxCreate_v4 (CUDA 12.5+) and _v2: a context of its own on the provider.
// Execution-affinity and CIG parameters are not forwarded.
API cuCtxCreate_v4(CUcontext* ctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  if (auto rc = device_ok(dev); rc != CUDA_SUCCESS) return rc;
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (params != nullptr && (params->numExecAffinityParams > 0 || params->cigParams != nullptr)) {
    shim::warn_once("context parameters not forwarded yet", "cuCtxCreate");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::CtxCreate, [&](wire::Writer& w) { w.u32(flags), w.i32(dev); }, &reply);
  if (rc != 0) return R(rc);
  *ctx = as<CUcontext>(read_u64(reply));
  shim::push_ctx(u(*ctx));  // cuCtxCreate makes the new context current
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.contexts[u(*ctx)] = dev;
  return CUDA_SUCCESS;
}
extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI cuCtxCreate_v2(CUcontext* ctx, unsigned int flags,
                                                                                  CUdevice dev) {
  return cuCtxCreate_v4(ctx, nullptr, flags, dev);
}
API cuCtxDestroy_v2(CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  {
    auto& l = local();
    std::lock_guard lock(l.mutex);
    if (l.contexts.erase(u(ctx)) == 0) return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (shim::current_ctx() == u(ctx)) shim::pop_ctx();
  return R(shim::post(Op::CtxDestroy, [&](wire::Writer& w) { w.u64(u(ctx)); }));
}
API cuCtxGetCurrent(CUcontext* ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *ctx = as<CUcontext>(shim::current_ctx());
  return need_init();
}
API cuCtxSetCurrent(CUcontext ctx) {
  if (auto rc = need_init(); rc != CUDA_SUCCESS) return rc;
  shim::set_current_ctx(u(ctx));
  return CUDA_SUCCESS;
}
API cuCtxPushCurrent_v2(CUcontext ctx) {
  if (auto rc = need_init(); rc != CUDA_SUCCESS) return rc;
  shim::push_ctx(u(ctx));
  return CUDA_SUCCESS;
}
API cuCtxPopCurrent_v2(CUcontext* ctx) {
  if (auto rc = need_init(); rc != CUDA_SUCCESS) return rc;
  auto c = shim::pop_ctx();
  if (ctx != nullptr) *ctx = as<CUcontext>(c);
  return CUDA_SUCCESS;
}
API cuCtxGetDevice(CUdevice* dev) {
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (shim::current_ctx() == 0) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = device_of(shim::current_ctx());
  return CUDA_SUCCESS;
}
API cuCtxGetDevice_v2(CUdevice* dev, CUcontext ctx) {
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t c = ctx != nullptr ? u(ctx) : shim::current_ctx();
  if (c == 0) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = device_of(c);
  return CUDA_SUCCESS;
}
API cuCtxGetFlags(unsigned int* flags) {
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  return shim::current_ctx() == 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
API cuCtxGetApiVersion(CUcontext, unsigned int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 3020;  // what the driver reports for every context made since CUDA 3.2
  return CUDA_SUCCESS;
}
API cuCtxGetId(CUcontext ctx, unsigned long long* id) {
  if (id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *id = ctx != nullptr ? u(ctx) : shim::current_ctx();
  return *id == 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}
API cuCtxSynchronize() {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::call(Op::CtxSynchronize, [&](wire::Writer& w) { w.u64(ctx); }));
}
API cuCtxSynchronize_v2(CUcontext ctx) {
  std::uint64_t c = ctx != nullptr ? u(ctx) : shim::current_ctx();
  return R(shim::call(Op::CtxSynchronize, [&](wire::Writer& w) { w.u64(c); }));
}
API cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  if (least != nullptr) *least = 0;
  if (greatest != nullptr) *greatest = -5;
  return need_init();
}
API cuCtxGetLimit(size_t* value, CUlimit limit) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The driver's defaults; cuCtxSetLimit is not forwarded yet (docs/CUDA.md).
  switch (limit) {
    case CU_LIMIT_STACK_SIZE: *value = 1024; break;
    case CU_LIMIT_PRINTF_FIFO_SIZE: *value = 1 << 20; break;
    case CU_LIMIT_MALLOC_HEAP_SIZE: *value = 8 << 20; break;
    case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH: *value = 2; break;
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT: *value = 2048; break;
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: *value = 64; break;
    default: return CUDA_ERROR_UNSUPPORTED_LIMIT;
  }
  return CUDA_SUCCESS;
}
API cuCtxGetCacheConfig(CUfunc_cache* c) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *c = CU_FUNC_CACHE_PREFER_NONE;
  return CUDA_SUCCESS;
}

// ---- memory ----
API cuMemAlloc_v2(CUdeviceptr* p, size_t size) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::MemAlloc, [&](wire::Writer& w) { w.u64(ctx), w.u64(size); }, &reply);
  if (rc != 0) return R(rc);
  *p = read_u64(reply);
  // Reserve the same addresses here, so no host buffer of this process can
  // alias a device pointer (cuMemcpy and pointer queries tell them apart by
  // address). Whole pages only: the driver's allocations are page aligned,
  // the test double's small ones may share a page with their neighbour.
  reserve(*p, size, true);
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.allocations[*p] = size;
  return CUDA_SUCCESS;
}
API cuMemFree_v2(CUdeviceptr p) {
  if (p == 0) return CUDA_SUCCESS;
  {
    auto& l = local();
    std::lock_guard lock(l.mutex);
    auto it = l.allocations.find(p);
    if (it == l.allocations.end()) return CUDA_ERROR_INVALID_VALUE;
    reserve(p, it->second, false);
    l.allocations.erase(it);
  }
  return R(shim::post(Op::MemFree, [&](wire::Writer& w) { w.u64(p); }));
}
API cuMemGetInfo_v2(size_t* free, size_t* total) {
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::MemGetInfo, [&](wire::Writer& w) { w.u64(ctx); }, &reply);
  if (rc != 0) return R(rc);
  if (free != nullptr) *free = read_u64(reply);
  if (total != nullptr) *total = read_u64(reply, 8);
  return CUDA_SUCCESS;
}
// Page-locked host memory is ordinary memory here: the copy to the provider
// goes through the session anyway.
API cuMemHostAlloc(void** p, size_t size, unsigned int) {
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *p = std::aligned_alloc(4096, (size + 4095) / 4096 * 4096 + 4096);
  if (*p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.host_allocations[*p] = size;
  return CUDA_SUCCESS;
}
API cuMemAllocHost_v2(void** p, size_t size) { return cuMemHostAlloc(p, size, 0); }
API cuMemFreeHost(void* p) {
  auto& l = local();
  std::lock_guard lock(l.mutex);
  if (l.host_allocations.erase(p) == 0) return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  return CUDA_SUCCESS;
}
API cuMemHostRegister_v2(void*, size_t, unsigned int) { return CUDA_SUCCESS; }  // see cuMemHostAlloc
API cuMemHostUnregister(void*) { return CUDA_SUCCESS; }

API cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) { return htod(dst, src, n, 0); }
API cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) { return dtoh(dst, src, n, 0); }
API cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return dtod(dst, src, n, 0); }
API cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) { return htod(dst, src, n, u(s)); }
API cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) { return dtoh(dst, src, n, u(s)); }
API cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return dtod(dst, src, n, u(s)); }
API cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_any(dst, src, n, 0); }
API cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return copy_any(dst, src, n, u(s)); }
API cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) { return htod(dst, src, n, 2); }
API cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) { return dtoh(dst, src, n, 2); }
API cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return dtod(dst, src, n, 2); }
API cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  return htod(dst, src, n, stream_of(s, true));
}
API cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  return dtoh(dst, src, n, stream_of(s, true));
}
API cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return dtod(dst, src, n, stream_of(s, true));
}
API cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_any(dst, src, n, 2); }
API cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  return copy_any(dst, src, n, stream_of(s, true));
}

API cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return memset_any(d, v, 1, n, 0); }
API cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return memset_any(d, v, 2, n, 0); }
API cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { return memset_any(d, v, 4, n, 0); }
API cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return memset_any(d, v, 1, n, u(s)); }
API cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return memset_any(d, v, 2, n, u(s)); }
API cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return memset_any(d, v, 4, n, u(s)); }
API cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { return memset_any(d, v, 1, n, 2); }
API cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) { return memset_any(d, v, 2, n, 2); }
API cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { return memset_any(d, v, 4, n, 2); }
API cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return memset_any(d, v, 1, n, stream_of(s, true));
}
API cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
  return memset_any(d, v, 2, n, stream_of(s, true));
}
API cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s) {
  return memset_any(d, v, 4, n, stream_of(s, true));
}

API cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr p) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!is_device(p)) return CUDA_ERROR_INVALID_VALUE;  // as the driver says for unregistered host memory
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data) = CU_MEMORYTYPE_DEVICE; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = p; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<unsigned*>(data) = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = as<CUcontext>(shim::current_ctx()); return CUDA_SUCCESS;
    default: return CUDA_ERROR_NOT_SUPPORTED;
  }
}
API cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data, CUdeviceptr p) {
  if (attrs == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool dev = is_device(p);
  for (unsigned i = 0; i < n; ++i) {
    if (data[i] == nullptr) continue;
    if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE && !dev) {
      *static_cast<unsigned*>(data[i]) = 0;  // unregistered host memory
      continue;
    }
    if (!dev) {
      std::memset(data[i], 0, attrs[i] == CU_POINTER_ATTRIBUTE_CONTEXT ? sizeof(void*) : sizeof(int));
      continue;
    }
    if (auto rc = cuPointerGetAttribute(data[i], attrs[i], p); rc != CUDA_SUCCESS) {
      std::memset(data[i], 0, sizeof(int));
    }
  }
  return CUDA_SUCCESS;
}

// ---- modules, libraries, functions ----
API cuModuleLoadData(CUmodule* m, const void* image) { return load_module(m, image); }
API cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned int n, CUjit_option*, void**) {
  if (n > 0) shim::warn_once("JIT options ignored", "cuModuleLoadDataEx");
  return load_module(m, image);
}
API cuModuleLoadFatBinary(CUmodule* m, const void* image) { return load_module(m, image); }
API cuModuleUnload(CUmodule m) {
  return R(shim::post(Op::ModuleUnload, [&](wire::Writer& w) { w.u64(u(m)); }));
}
API cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  if (f == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::ModuleGetFunction, [&](wire::Writer& w) { w.u64(u(m)), w.str(name); }, &reply);
  if (rc != 0) return R(rc);
  *f = as<CUfunction>(read_u64(reply));
  read_params(reply, u(*f));
  return CUDA_SUCCESS;
}
API cuModuleGetGlobal_v2(CUdeviceptr* p, size_t* size, CUmodule m, const char* name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::ModuleGetGlobal, [&](wire::Writer& w) { w.u64(u(m)), w.str(name); }, &reply);
  if (rc != 0) return R(rc);
  return take_global(reply, p, size);
}
API cuModuleGetLoadingMode(CUmoduleLoadingMode* mode) {
  if (mode == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *mode = CU_MODULE_EAGER_LOADING;  // the server loads whole images (the real driver may still load lazily)
  return CUDA_SUCCESS;
}
API cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option*, void**, unsigned int, CUlibraryOption*, void**,
                      unsigned int) {
  if (lib == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (auto rc = upload(code); rc != CUDA_SUCCESS) return rc;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::LibraryLoad, [](wire::Writer&) {}, &reply);
  if (rc == 0) *lib = as<CUlibrary>(read_u64(reply));
  return R(rc);
}
API cuLibraryUnload(CUlibrary lib) {
  return R(shim::post(Op::LibraryUnload, [&](wire::Writer& w) { w.u64(u(lib)); }));
}
API cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  if (k == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::LibraryGetKernel, [&](wire::Writer& w) { w.u64(u(lib)), w.str(name); }, &reply);
  if (rc != 0) return R(rc);
  *k = as<CUkernel>(read_u64(reply));
  read_params(reply, u(*k));
  return CUDA_SUCCESS;
}
API cuLibraryGetGlobal(CUdeviceptr* p, size_t* size, CUlibrary lib, const char* name) {
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::LibraryGetGlobal, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(lib)), w.str(name); }, &reply);
  if (rc != 0) return R(rc);
  return take_global(reply, p, size);
}
API cuKernelGetFunction(CUfunction* f, CUkernel k) {
  if (f == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::KernelGetFunction, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(k)); }, &reply);
  if (rc != 0) return R(rc);
  *f = as<CUfunction>(read_u64(reply));
  auto& l = local();
  std::lock_guard lock(l.mutex);
  if (auto it = l.params.find(u(k)); it != l.params.end()) l.params[u(*f)] = it->second;
  return CUDA_SUCCESS;
}
API cuFuncGetAttribute(int* value, CUfunction_attribute attrib, CUfunction f) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::FuncGetAttribute, [&](wire::Writer& w) { w.u64(u(f)), w.i32(attrib); }, &reply);
  if (rc == 0 && reply.size() >= 4) std::memcpy(value, reply.data(), 4);
  return R(rc);
}
API cuKernelGetAttribute(int* value, CUfunction_attribute attrib, CUkernel k, CUdevice) {
  return cuFuncGetAttribute(value, attrib, reinterpret_cast<CUfunction>(k));
}
API cuFuncSetAttribute(CUfunction f, CUfunction_attribute attrib, int value) {
  return R(shim::post(Op::FuncSetAttribute, [&](wire::Writer& w) { w.u64(u(f)), w.i32(attrib), w.i32(value); }));
}
API cuKernelSetAttribute(CUfunction_attribute attrib, int value, CUkernel k, CUdevice) {
  return cuFuncSetAttribute(reinterpret_cast<CUfunction>(k), attrib, value);
}
API cuFuncSetCacheConfig(CUfunction, CUfunc_cache) { return CUDA_SUCCESS; }  // a preference the provider may ignore too
API cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset, size_t* size) {
  auto& l = local();
  std::lock_guard lock(l.mutex);
  auto it = l.params.find(u(f));
  if (it == l.params.end()) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= it->second.size()) return CUDA_ERROR_INVALID_VALUE;
  if (offset != nullptr) *offset = it->second[index].offset;
  if (size != nullptr) *size = it->second[index].size;
  return CUDA_SUCCESS;
}

// The dynamic shared memory a block can still get when `blocks` blocks of
// `block_size` threads share one multiprocessor: computed here from the
// cached device attributes and the function's static shared memory.
API cuOccupancyAvailableDynamicSMemPerBlock(size_t* out, CUfunction f, int blocks, int block_size) {
  if (out == nullptr || blocks <= 0 || block_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  int dev = device_of(shim::current_ctx());
  int per_sm = 0, per_block = 0, reserved = 0, fixed = 0;
  if (auto rc = cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev); rc) return rc;
  if (auto rc = cuDeviceGetAttribute(&per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev); rc) return rc;
  cuDeviceGetAttribute(&reserved, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev);
  if (auto rc = cuFuncGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f); rc) return rc;
  long long share = static_cast<long long>(per_sm) / blocks - reserved - fixed;
  long long cap = static_cast<long long>(per_block) - fixed;
  *out = static_cast<size_t>(std::max(0LL, std::min(share, cap)));
  return CUDA_SUCCESS;
}

API cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, CUfunction f, int block_size, size_t smem,
                                                          unsigned int flags) {
  if (blocks == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::Occupancy, [&](wire::Writer& w) { w.u64(u(f)), w.i32(block_size), w.u64(smem), w.u32(flags); },
                      &reply);
  if (rc == 0 && reply.size() >= 4) std::memcpy(blocks, reply.data(), 4);
  return R(rc);
}
API cuOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, CUfunction f, int block_size, size_t smem) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, block_size, smem, 0);
}

API cuOccupancyMaxActiveClusters(int* clusters, CUfunction f, const CUlaunchConfig* c) {
  if (clusters == nullptr || c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint32_t dims[10] = {c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                            c->sharedMemBytes, 0, 0, 0};
  for (unsigned i = 0; i < c->numAttrs; ++i) {
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      dims[7] = c->attrs[i].value.clusterDim.x, dims[8] = c->attrs[i].value.clusterDim.y;
      dims[9] = c->attrs[i].value.clusterDim.z;
    }
  }
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::OccupancyClusters, [&](wire::Writer& w) {
    w.u64(u(f));
    for (auto d : dims) w.u32(d);
  }, &reply);
  if (rc == 0 && reply.size() >= 4) std::memcpy(clusters, reply.data(), 4);
  return R(rc);
}

// ---- launches ----
API cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shmem, CUstream s, void** params, void** extra) {
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(f, grid, block, shmem, u(s), params, extra);
}
API cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, CUstream s, void** params, void** extra) {
  unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return launch(f, grid, block, shmem, stream_of(s, true), params, extra);
}
API cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launch_ex(c, f, params, extra, false);
}
API cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params, void** extra) {
  return launch_ex(c, f, params, extra, true);
}

// ---- streams and events ----
API cuStreamCreateWithPriority(CUstream* s, unsigned int flags, int priority) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::StreamCreate, [&](wire::Writer& w) { w.u64(ctx), w.u32(flags), w.i32(priority); }, &reply);
  if (rc == 0) *s = as<CUstream>(read_u64(reply));
  return R(rc);
}
API cuStreamCreate(CUstream* s, unsigned int flags) { return cuStreamCreateWithPriority(s, flags, 0); }
API cuStreamDestroy_v2(CUstream s) {
  return R(shim::post(Op::StreamDestroy, [&](wire::Writer& w) { w.u64(u(s)); }));
}
API cuStreamSynchronize(CUstream s) { return sync_stream(u(s)); }
API cuStreamSynchronize_ptsz(CUstream s) { return sync_stream(stream_of(s, true)); }
API cuStreamQuery(CUstream s) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::call(Op::StreamQuery, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(s)); }));
}
API cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::StreamWaitEvent, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(s)), w.u64(u(e)), w.u32(flags); }));
}
API cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  return cuStreamWaitEvent(as<CUstream>(stream_of(s, true)), e, flags);
}
// Stream capture (CUDA graphs) is not supported yet: no stream is ever capturing.
API cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
API cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) { return cuStreamIsCapturing(s, status); }
API cuEventCreate(CUevent* e, unsigned int flags) {
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::EventCreate, [&](wire::Writer& w) { w.u64(ctx), w.u32(flags); }, &reply);
  if (rc == 0) *e = as<CUevent>(read_u64(reply));
  return R(rc);
}
API cuEventDestroy_v2(CUevent e) {
  return R(shim::post(Op::EventDestroy, [&](wire::Writer& w) { w.u64(u(e)); }));
}
API cuEventRecord(CUevent e, CUstream s) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::EventRecord, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(e)), w.u64(u(s)); }));
}
API cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, as<CUstream>(stream_of(s, true))); }
API cuEventSynchronize(CUevent e) {
  return R(shim::call(Op::EventSynchronize, [&](wire::Writer& w) { w.u64(u(e)); }));
}
API cuEventQuery(CUevent e) { return R(shim::call(Op::EventQuery, [&](wire::Writer& w) { w.u64(u(e)); })); }
API cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::EventElapsedTime, [&](wire::Writer& w) { w.u64(u(a)), w.u64(u(b)); }, &reply);
  if (rc == 0 && reply.size() >= 4) std::memcpy(ms, reply.data(), 4);
  return R(rc);
}
#undef cuEventElapsedTime  // the pre-12.8 entry point under its own name
extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  return cuEventElapsedTime_v2(ms, a, b);
}

// ---- errors ----
API cuGetErrorName(CUresult e, const char** s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (e) {
#define N(x) case x: *s = #x; return CUDA_SUCCESS;
    N(CUDA_SUCCESS) N(CUDA_ERROR_INVALID_VALUE) N(CUDA_ERROR_OUT_OF_MEMORY) N(CUDA_ERROR_NOT_INITIALIZED)
    N(CUDA_ERROR_NO_DEVICE) N(CUDA_ERROR_INVALID_DEVICE) N(CUDA_ERROR_INVALID_IMAGE) N(CUDA_ERROR_INVALID_CONTEXT)
    N(CUDA_ERROR_INVALID_HANDLE) N(CUDA_ERROR_NOT_FOUND) N(CUDA_ERROR_NOT_READY) N(CUDA_ERROR_NOT_SUPPORTED)
    N(CUDA_ERROR_LAUNCH_FAILED) N(CUDA_ERROR_ILLEGAL_ADDRESS) N(CUDA_ERROR_UNKNOWN)
#undef N
    default: *s = "CUDA_ERROR (see cuda.h)"; return CUDA_SUCCESS;
  }
}
API cuGetErrorString(CUresult e, const char** s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (e == CUDA_ERROR_NOT_SUPPORTED) {
    *s = "operation not supported (by the remote GPU or by RunSnack's shim yet)";
    return CUDA_SUCCESS;
  }
  return cuGetErrorName(e, s);
}
