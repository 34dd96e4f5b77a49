#include "cuda/server/driver_backend.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>

namespace runsnack::cuda {
namespace {
using CUres = int;
using H = void*;  // CUcontext, CUmodule, CUfunction, CUstream, ... are pointers
using Dptr = unsigned long long;

// cuda.h's CUlaunchAttribute and CUlaunchConfig (a stable ABI), so the
// server builds without the toolkit.
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    unsigned cluster[3];
    char bytes[64];
  } value;
};
struct LaunchConfig {
  unsigned grid[3], block[3], shared_mem;
  H stream;
  LaunchAttribute* attrs;
  unsigned num_attrs;
};
constexpr int kLaunchAttributeClusterDimension = 4;

template <class T>
H h(T v) {
  return reinterpret_cast<H>(static_cast<std::uintptr_t>(v));
}
u64 v(H p) { return reinterpret_cast<std::uintptr_t>(p); }
}  // namespace

// The driver entry points we call, by their exported (versioned) names.
#define RUNSNACK_DRIVER_API(X)                                                                   \
  X(cuInit, CUres(unsigned))                                                                 \
  X(cuDriverGetVersion, CUres(int*))                                                         \
  X(cuDeviceGetCount, CUres(int*))                                                           \
  X(cuDeviceGet, CUres(int*, int))                                                           \
  X(cuDeviceGetName, CUres(char*, int, int))                                                 \
  X(cuDeviceGetUuid_v2, CUres(std::uint8_t*, int))                                           \
  X(cuDeviceTotalMem_v2, CUres(std::size_t*, int))                                           \
  X(cuDeviceGetAttribute, CUres(int*, int, int))                                             \
  X(cuDevicePrimaryCtxRetain, CUres(H*, int))                                                \
  X(cuDevicePrimaryCtxRelease_v2, CUres(int))                                                \
  X(cuCtxCreate_v2, CUres(H*, unsigned, int))                                                \
  X(cuCtxCreate_v4, CUres(H*, void*, unsigned, int))                                         \
  X(cuCtxDestroy_v2, CUres(H))                                                               \
  X(cuCtxSetCurrent, CUres(H))                                                               \
  X(cuCtxSynchronize, CUres())                                                               \
  X(cuMemAlloc_v2, CUres(Dptr*, std::size_t))                                                \
  X(cuMemFree_v2, CUres(Dptr))                                                               \
  X(cuMemGetInfo_v2, CUres(std::size_t*, std::size_t*))                                      \
  X(cuMemcpyHtoDAsync_v2, CUres(Dptr, const void*, std::size_t, H))                          \
  X(cuMemcpyDtoHAsync_v2, CUres(void*, Dptr, std::size_t, H))                                \
  X(cuMemcpyDtoDAsync_v2, CUres(Dptr, Dptr, std::size_t, H))                                 \
  X(cuMemsetD8Async, CUres(Dptr, unsigned char, std::size_t, H))                             \
  X(cuMemsetD16Async, CUres(Dptr, unsigned short, std::size_t, H))                           \
  X(cuMemsetD32Async, CUres(Dptr, unsigned, std::size_t, H))                                 \
  X(cuModuleLoadData, CUres(H*, const void*))                                                \
  X(cuModuleUnload, CUres(H))                                                                \
  X(cuModuleGetFunction, CUres(H*, H, const char*))                                          \
  X(cuModuleGetGlobal_v2, CUres(Dptr*, std::size_t*, H, const char*))                        \
  X(cuLibraryLoadData, CUres(H*, const void*, void*, void*, unsigned, void*, void*, unsigned)) \
  X(cuLibraryUnload, CUres(H))                                                               \
  X(cuLibraryGetKernel, CUres(H*, H, const char*))                                           \
  X(cuLibraryGetGlobal, CUres(Dptr*, std::size_t*, H, const char*))                          \
  X(cuKernelGetFunction, CUres(H*, H))                                                       \
  X(cuFuncGetParamInfo, CUres(H, std::size_t, std::size_t*, std::size_t*))                   \
  X(cuKernelGetParamInfo, CUres(H, std::size_t, std::size_t*, std::size_t*))                 \
  X(cuFuncGetAttribute, CUres(int*, int, H))                                                 \
  X(cuFuncSetAttribute, CUres(H, int, int))                                                  \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, CUres(int*, H, int, std::size_t, unsigned))  \
  X(cuOccupancyMaxActiveClusters, CUres(int*, H, const LaunchConfig*))                           \
  X(cuLaunchKernel, CUres(H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void**, void**)) \
  X(cuStreamCreateWithPriority, CUres(H*, unsigned, int))                                    \
  X(cuStreamDestroy_v2, CUres(H))                                                            \
  X(cuStreamSynchronize, CUres(H))                                                           \
  X(cuStreamQuery, CUres(H))                                                                 \
  X(cuStreamWaitEvent, CUres(H, H, unsigned))                                                \
  X(cuEventCreate, CUres(H*, unsigned))                                                      \
  X(cuEventDestroy_v2, CUres(H))                                                             \
  X(cuEventRecord, CUres(H, H))                                                              \
  X(cuEventSynchronize, CUres(H))                                                            \
  X(cuEventQuery, CUres(H))                                                                  \
  X(cuEventElapsedTime_v2, CUres(float*, H, H))

struct DriverBackend::Api {
  void* lib = nullptr;
  std::string path;
#define RUNSNACK_FIELD(name, ...) std::add_pointer_t<__VA_ARGS__> name = nullptr;
  RUNSNACK_DRIVER_API(RUNSNACK_FIELD)
#undef RUNSNACK_FIELD
};

namespace {
// Absolute paths first: the server may inherit an LD_LIBRARY_PATH that puts
// our shim first. RUNSNACK_CUDA_DRIVER names the driver explicitly.
void* open_real_driver(std::string& path) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("RUNSNACK_CUDA_DRIVER")) candidates.emplace_back(env);
  for (const char* p : {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1", "/usr/lib/libcuda.so.1",
                        "/usr/local/nvidia/lib64/libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1", "libcuda.so.1"}) {
    candidates.emplace_back(p);
  }
  for (const auto& c : candidates) {
    void* lib = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) continue;
    if (::dlsym(lib, "runsnack_cuda_shim_marker") != nullptr) {
      std::fprintf(stderr, "runsnack cuda-server: %s is RunSnack's own shim, not the driver; skipped\n", c.c_str());
      ::dlclose(lib);
      continue;
    }
    path = c;
    return lib;
  }
  return nullptr;
}
}  // namespace

std::optional<std::string> find_real_driver() {
  std::string path;
  void* lib = open_real_driver(path);
  if (lib == nullptr) return std::nullopt;
  struct link_map* map = nullptr;  // the file the loader picked, for a bare name
  if (::dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name != '\0')
    path = map->l_name;
  ::dlclose(lib);
  return path;
}

DriverBackend::DriverBackend() : api_(std::make_unique<Api>()) {}
DriverBackend::~DriverBackend() {
  if (api_->lib != nullptr) ::dlclose(api_->lib);
}

int DriverBackend::init() {
  if (api_->lib == nullptr) {
    api_->lib = open_real_driver(api_->path);
    if (api_->lib == nullptr) {
      std::fprintf(stderr, "runsnack cuda-server: no NVIDIA driver (libcuda.so.1) on this machine: no CUDA device\n");
      return kErrNoDevice;
    }
#define RUNSNACK_LOAD(name, ...) api_->name = reinterpret_cast<std::add_pointer_t<__VA_ARGS__>>(::dlsym(api_->lib, #name));
    RUNSNACK_DRIVER_API(RUNSNACK_LOAD)
#undef RUNSNACK_LOAD
    if (api_->cuInit == nullptr) {
      std::fprintf(stderr, "runsnack cuda-server: %s has no cuInit\n", api_->path.c_str());
      return kErrNoDevice;
    }
  }
  int rc = api_->cuInit(0);
  if (rc != 0) std::fprintf(stderr, "runsnack cuda-server: cuInit on %s failed: %d\n", api_->path.c_str(), rc);
  return rc;
}

// Calls an entry point the loaded driver may lack (older drivers).
#define CALL(name, ...) (api_->name ? api_->name(__VA_ARGS__) : kErrNotSupported)

int DriverBackend::driver_version(int& version) { return CALL(cuDriverGetVersion, &version); }

int DriverBackend::devices(std::vector<wire::DeviceInfo>& out) {
  int count = 0;
  if (int rc = CALL(cuDeviceGetCount, &count); rc != 0) return rc;
  out.clear();
  for (int i = 0; i < count; ++i) {
    int dev = 0;
    if (int rc = CALL(cuDeviceGet, &dev, i); rc != 0) return rc;
    wire::DeviceInfo d;
    char name[256] = {};
    CALL(cuDeviceGetName, name, sizeof name, dev);
    d.name = name;
    CALL(cuDeviceGetUuid_v2, d.uuid, dev);
    std::size_t total = 0;
    CALL(cuDeviceTotalMem_v2, &total, dev);
    d.total_mem = total;
    // Every attribute up to the first the driver does not know (and a margin).
    d.attributes.assign(256, 0);
    for (int a = 1; a < 256; ++a) {
      int value = 0;
      if (CALL(cuDeviceGetAttribute, &value, a, dev) == 0) d.attributes[static_cast<std::size_t>(a)] = value;
    }
    out.push_back(std::move(d));
  }
  return 0;
}

int DriverBackend::primary_ctx_retain(int dev, u64& ctx) {
  H c = nullptr;
  int rc = CALL(cuDevicePrimaryCtxRetain, &c, dev);
  ctx = v(c);
  return rc;
}
int DriverBackend::primary_ctx_release(int dev) { return CALL(cuDevicePrimaryCtxRelease_v2, dev); }
int DriverBackend::ctx_create(unsigned flags, int dev, u64& ctx) {
  H c = nullptr;
  // CUDA 13 drivers may export only the parameterised form.
  int rc = api_->cuCtxCreate_v4 ? api_->cuCtxCreate_v4(&c, nullptr, flags, dev) : CALL(cuCtxCreate_v2, &c, flags, dev);
  ctx = v(c);
  return rc;
}
int DriverBackend::ctx_destroy(u64 ctx) { return CALL(cuCtxDestroy_v2, h(ctx)); }
int DriverBackend::set_current(u64 ctx) { return CALL(cuCtxSetCurrent, h(ctx)); }
int DriverBackend::ctx_synchronize() { return CALL(cuCtxSynchronize); }
int DriverBackend::mem_alloc(u64 size, u64& dptr) {
  Dptr p = 0;
  int rc = CALL(cuMemAlloc_v2, &p, size);
  dptr = p;
  return rc;
}
int DriverBackend::mem_free(u64 dptr) { return CALL(cuMemFree_v2, dptr); }
int DriverBackend::mem_get_info(u64& free, u64& total) {
  std::size_t f = 0, t = 0;
  int rc = CALL(cuMemGetInfo_v2, &f, &t);
  free = f;
  total = t;
  return rc;
}
// From pageable memory the driver has copied the source before it returns,
// so the frame buffer may be reused at once.
int DriverBackend::memcpy_htod(u64 dst, const void* src, u64 n, u64 stream) {
  return CALL(cuMemcpyHtoDAsync_v2, dst, src, n, h(stream));
}
int DriverBackend::memcpy_dtoh(void* dst, u64 src, u64 n, u64 stream) {
  int rc = CALL(cuMemcpyDtoHAsync_v2, dst, src, n, h(stream));
  return rc != 0 ? rc : CALL(cuStreamSynchronize, h(stream));
}
int DriverBackend::memcpy_dtod(u64 dst, u64 src, u64 n, u64 stream) {
  return CALL(cuMemcpyDtoDAsync_v2, dst, src, n, h(stream));
}
int DriverBackend::memset(u64 dst, std::uint32_t value, std::uint32_t elem, u64 count, u64 stream) {
  if (elem == 1) return CALL(cuMemsetD8Async, dst, static_cast<unsigned char>(value), count, h(stream));
  if (elem == 2) return CALL(cuMemsetD16Async, dst, static_cast<unsigned short>(value), count, h(stream));
  return CALL(cuMemsetD32Async, dst, value, count, h(stream));
}
int DriverBackend::module_load(const void* image, std::size_t, u64& module) {
  H m = nullptr;
  int rc = CALL(cuModuleLoadData, &m, image);
  module = v(m);
  return rc;
}
int DriverBackend::module_unload(u64 module) { return CALL(cuModuleUnload, h(module)); }
int DriverBackend::module_get_function(u64 module, const std::string& name, u64& fn) {
  H f = nullptr;
  int rc = CALL(cuModuleGetFunction, &f, h(module), name.c_str());
  fn = v(f);
  return rc;
}
int DriverBackend::module_get_global(u64 module, const std::string& name, u64& dptr, u64& size) {
  Dptr p = 0;
  std::size_t s = 0;
  int rc = CALL(cuModuleGetGlobal_v2, &p, &s, h(module), name.c_str());
  dptr = p;
  size = s;
  return rc;
}
int DriverBackend::library_load(const void* image, std::size_t, u64& library) {
  H l = nullptr;
  int rc = CALL(cuLibraryLoadData, &l, image, nullptr, nullptr, 0u, nullptr, nullptr, 0u);
  library = v(l);
  return rc;
}
int DriverBackend::library_unload(u64 library) { return CALL(cuLibraryUnload, h(library)); }
int DriverBackend::library_get_kernel(u64 library, const std::string& name, u64& kernel) {
  H k = nullptr;
  int rc = CALL(cuLibraryGetKernel, &k, h(library), name.c_str());
  kernel = v(k);
  return rc;
}
int DriverBackend::library_get_global(u64 library, const std::string& name, u64& dptr, u64& size) {
  Dptr p = 0;
  std::size_t s = 0;
  int rc = CALL(cuLibraryGetGlobal, &p, &s, h(library), name.c_str());
  dptr = p;
  size = s;
  return rc;
}
int DriverBackend::kernel_get_function(u64 kernel, u64& fn) {
  H f = nullptr;
  int rc = CALL(cuKernelGetFunction, &f, h(kernel));
  fn = v(f);
  return rc;
}
int DriverBackend::param_info(u64 fn, bool is_kernel, std::vector<wire::Param>& out) {
  out.clear();
  for (std::size_t i = 0; i < wire::kMaxParams; ++i) {
    std::size_t off = 0, size = 0;
    int rc = is_kernel ? CALL(cuKernelGetParamInfo, h(fn), i, &off, &size) : CALL(cuFuncGetParamInfo, h(fn), i, &off, &size);
    if (rc != 0) return i == 0 && rc != kErrInvalidValue ? rc : 0;  // INVALID_VALUE: past the last parameter
    out.push_back(wire::Param{static_cast<std::uint32_t>(off), static_cast<std::uint32_t>(size)});
  }
  return 0;
}
int DriverBackend::func_get_attribute(u64 fn, int attrib, int& value) {
  return CALL(cuFuncGetAttribute, &value, attrib, h(fn));
}
int DriverBackend::func_set_attribute(u64 fn, int attrib, int value) {
  return CALL(cuFuncSetAttribute, h(fn), attrib, value);
}
int DriverBackend::occupancy(u64 fn, int block_size, u64 dynamic_smem, unsigned flags, int& blocks) {
  return CALL(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, &blocks, h(fn), block_size, dynamic_smem, flags);
}
int DriverBackend::occupancy_clusters(u64 fn, const std::uint32_t dims[10], int& clusters) {
  LaunchAttribute cluster{};
  cluster.id = kLaunchAttributeClusterDimension;
  for (int i = 0; i < 3; ++i) cluster.value.cluster[i] = dims[7 + i];
  LaunchConfig c{{dims[0], dims[1], dims[2]}, {dims[3], dims[4], dims[5]}, dims[6], nullptr, &cluster,
                 dims[7] != 0 ? 1u : 0u};
  return CALL(cuOccupancyMaxActiveClusters, &clusters, h(fn), &c);
}
int DriverBackend::launch(u64 fn, const std::uint32_t grid[3], const std::uint32_t block[3], std::uint32_t shmem,
                          u64 stream, const void* params, std::size_t params_size) {
  // CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE, CU_LAUNCH_PARAM_END
  std::size_t size = params_size;
  void* extra[] = {h(1), const_cast<void*>(params), h(2), &size, h(0)};
  return CALL(cuLaunchKernel, h(fn), grid[0], grid[1], grid[2], block[0], block[1], block[2], shmem, h(stream),
              nullptr, params_size > 0 ? extra : nullptr);
}
int DriverBackend::stream_create(unsigned flags, int priority, u64& stream) {
  H s = nullptr;
  int rc = CALL(cuStreamCreateWithPriority, &s, flags, priority);
  stream = v(s);
  return rc;
}
int DriverBackend::stream_destroy(u64 stream) { return CALL(cuStreamDestroy_v2, h(stream)); }
int DriverBackend::stream_synchronize(u64 stream) { return CALL(cuStreamSynchronize, h(stream)); }
int DriverBackend::stream_query(u64 stream) { return CALL(cuStreamQuery, h(stream)); }
int DriverBackend::stream_wait_event(u64 stream, u64 event, unsigned flags) {
  return CALL(cuStreamWaitEvent, h(stream), h(event), flags);
}
int DriverBackend::event_create(unsigned flags, u64& event) {
  H e = nullptr;
  int rc = CALL(cuEventCreate, &e, flags);
  event = v(e);
  return rc;
}
int DriverBackend::event_destroy(u64 event) { return CALL(cuEventDestroy_v2, h(event)); }
int DriverBackend::event_record(u64 event, u64 stream) { return CALL(cuEventRecord, h(event), h(stream)); }
int DriverBackend::event_synchronize(u64 event) { return CALL(cuEventSynchronize, h(event)); }
int DriverBackend::event_query(u64 event) { return CALL(cuEventQuery, h(event)); }
int DriverBackend::event_elapsed(u64 start, u64 end, float& ms) {
  return CALL(cuEventElapsedTime_v2, &ms, h(start), h(end));
}

}  // namespace runsnack::cuda
