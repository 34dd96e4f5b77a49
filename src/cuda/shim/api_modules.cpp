// Driver API: modules, libraries, functions and kernels, occupancy, launches.
#include "cuda/shim/api_internal.hpp"

#include <algorithm>
#include <cstdio>

namespace shim = runsnack::cuda::shim;
namespace wire = runsnack::cuda::wire;
using wire::Op;
using namespace runsnack::cuda::shim::api;

namespace {

// Keeps the parameter layout that follows the handle in a lookup's reply.
void read_params(const std::vector<std::uint8_t>& reply, std::uint64_t handle) {
  if (reply.size() < 8) return;
  wire::Reader r(reply.data() + 8, reply.size() - 8);
  auto params = r.array<wire::Param>(wire::kMaxParams);
  auto& l = local();
  std::lock_guard lock(l.mutex);
  l.params[handle] = std::move(params);
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
