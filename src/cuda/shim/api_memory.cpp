// Driver API: device and host allocations, copies, memsets, pointer queries.
#include "cuda/shim/api_internal.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace shim = runsnack::cuda::shim;
namespace wire = runsnack::cuda::wire;
using wire::Op;
using namespace runsnack::cuda::shim::api;

namespace {

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

}  // namespace

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
