// Driver API: primary and created contexts, and what the current one reports.
#include "cuda/shim/api_internal.hpp"

namespace shim = runsnack::cuda::shim;
namespace wire = runsnack::cuda::wire;
using wire::Op;
using namespace runsnack::cuda::shim::api;

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
