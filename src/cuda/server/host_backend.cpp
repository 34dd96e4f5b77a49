#include "cuda/server/host_backend.hpp"

#include "cuda/server/host_kernels.hpp"

#include <algorithm>
#include <cstring>
#include <set>

namespace runsnack::cuda {
namespace {
constexpr u64 kPrimaryContext = 0xc0000;
constexpr u64 kAlign = HostBackend::kAlign;

// What an allocation of `size` bytes takes of the device memory (size <= kTotalMemory).
u64 charged(u64 size) { return (size + kAlign - 1) / kAlign * kAlign; }

// The attributes cudart and libraries read at start-up; an sm_90-like device.
std::vector<std::int32_t> attributes() {
  std::vector<std::int32_t> a(256, 0);
  auto set = [&](int i, int v) { a[static_cast<std::size_t>(i)] = v; };
  set(1, 1024);                                     // max threads per block
  set(2, 1024), set(3, 1024), set(4, 64);           // max block dims
  set(5, 2147483647), set(6, 65535), set(7, 65535);  // max grid dims
  set(8, 49152), set(9, 65536), set(10, 32);        // shared/block, const mem, warp size
  set(11, 2147483647), set(12, 65536);              // max pitch, registers/block
  set(13, 1500000), set(14, 512), set(15, 1);       // clock kHz, texture alignment, gpu overlap
  set(16, 4), set(17, 0), set(18, 0), set(19, 1);   // SMs, timeout, integrated, can map host memory
  set(20, 0), set(30, 512), set(31, 1), set(32, 0);  // compute mode, surface align, concurrent kernels, ECC
  set(33, 1), set(34, 0), set(35, 0);                // PCI bus, device, TCC
  set(36, 2619000), set(37, 5120), set(38, 52428800);  // memory clock, bus width, L2
  set(39, 2048), set(40, 2), set(41, 1);               // threads/SM, copy engines, unified addressing
  set(50, 0), set(75, 9), set(76, 0);                  // PCI domain, compute capability 9.0
  set(78, 1), set(79, 1), set(80, 1);                  // stream priorities, global/local L1
  set(81, 233472), set(82, 65536), set(83, 1);         // shared/SM, registers/SM, managed memory
  set(84, 0), set(86, 0), set(87, 1), set(88, 0);      // multi-GPU board, ...
  set(89, 1), set(95, 1), set(97, 227 * 1024), set(106, 32);  // concurrent managed, coop launch, optin smem, blocks/SM
  return a;
}
}  // namespace

std::vector<std::string> HostBackend::calls() const {
  std::lock_guard lock(mutex_);
  return {calls_.begin(), calls_.end()};
}

void HostBackend::record(std::string line) {
  std::lock_guard lock(mutex_);
  calls_bytes_ += line.size();
  calls_.push_back(std::move(line));
  // No one reads the log of a provider's server: it must not grow with the traffic.
  while (calls_bytes_ > kMaxCallLogBytes && calls_.size() > 1) {
    calls_bytes_ -= calls_.front().size();
    calls_.pop_front();
  }
}

bool HostBackend::charge(u64 bytes) {
  if (bytes > kTotalMemory - used_) return false;
  used_ += bytes;
  return true;
}

std::uint8_t* HostBackend::span(u64 p, u64 n) {
  auto it = memory_.upper_bound(p);
  if (it == memory_.begin()) return nullptr;
  --it;
  u64 off = p - it->first;
  if (off > it->second.size() || n > it->second.size() - off) return nullptr;
  return it->second.data() + off;
}

int HostBackend::new_handle(Handles& into, std::string name, u64 owner, u64& handle) {
  if (!charge(kHandleCost + name.size())) return kErrOutOfMemory;
  next_handle_ += 8;
  into.emplace(next_handle_, Named{std::move(name), owner});
  handle = next_handle_;
  return 0;
}

// As the driver does, the same function or kernel of a module or library is the same handle:
// looking it up again costs nothing.
int HostBackend::named_handle(Handles& into, const std::string& name, u64 owner, u64& handle) {
  if (auto it = by_name_.find({owner, name}); it != by_name_.end()) {
    handle = it->second;
    return 0;
  }
  if (int rc = new_handle(into, name, owner, handle); rc != 0) return rc;
  by_name_.emplace(std::pair(owner, name), handle);
  return 0;
}

int HostBackend::drop(Handles& from, u64 h, const char* what) {
  auto it = from.find(h);
  const bool known = it != from.end();
  if (known) {
    used_ -= kHandleCost + it->second.name.size();
    from.erase(it);
  }
  record(std::string(what) + (known ? "" : " (unknown)"));
  return 0;
}

// One pass over each table: a module or library unloaded with many functions costs no more.
void HostBackend::drop_owned(u64 owner) {
  std::set<u64> owners{owner};
  for (auto it = kernels_.begin(); it != kernels_.end();) {
    if (it->second.owner != owner) {
      ++it;
      continue;
    }
    used_ -= kHandleCost + it->second.name.size();
    owners.insert(it->first);  // the functions cuKernelGetFunction made of it go too
    by_name_.erase({owner, it->second.name});
    it = kernels_.erase(it);
  }
  for (auto it = functions_.begin(); it != functions_.end();) {
    if (!owners.count(it->second.owner)) {
      ++it;
      continue;
    }
    used_ -= kHandleCost + it->second.name.size();
    by_name_.erase({it->second.owner, it->second.name});
    it = functions_.erase(it);
  }
  for (auto it = globals_.lower_bound({owner, std::string()}); it != globals_.end() && it->first.first == owner;) {
    used_ -= kGlobalSize + it->first.second.size();
    memory_.erase(it->second);
    it = globals_.erase(it);
  }
}

int HostBackend::init() {
  initialised_ = true;
  record("init");
  return 0;
}
int HostBackend::driver_version(int& version) {
  version = 13000;
  return 0;
}
int HostBackend::devices(std::vector<wire::DeviceInfo>& out) {
  wire::DeviceInfo d;
  d.name = kDeviceName;
  for (int i = 0; i < 16; ++i) d.uuid[i] = static_cast<std::uint8_t>(0xa0 + i);
  d.total_mem = kTotalMemory;
  d.attributes = attributes();
  out = {d};
  return 0;
}
int HostBackend::primary_ctx_retain(int dev, u64& ctx) {
  if (dev != 0) return kErrInvalidDevice;
  ++primary_retains_;
  record("primary_ctx_retain");
  ctx = kPrimaryContext;
  return 0;
}
int HostBackend::primary_ctx_release(int dev) {
  if (dev != 0 || primary_retains_ == 0) return kErrInvalidContext;
  --primary_retains_;
  record("primary_ctx_release");
  return 0;
}
int HostBackend::ctx_create(unsigned, int dev, u64& ctx) {
  if (dev != 0) return kErrInvalidDevice;
  if (int rc = new_handle(contexts_, "", 0, ctx); rc != 0) return rc;
  record("ctx_create");
  return 0;
}
int HostBackend::ctx_destroy(u64 ctx) { return drop(contexts_, ctx, "ctx_destroy"); }
int HostBackend::set_current(u64 ctx) {
  if (ctx != kPrimaryContext && !contexts_.count(ctx)) return kErrInvalidContext;
  return 0;
}
int HostBackend::ctx_synchronize() {
  record("ctx_synchronize");
  return 0;
}

int HostBackend::mem_alloc(u64 size, u64& dptr) {
  if (size == 0) return kErrInvalidValue;
  if (size > kTotalMemory || !charge(charged(size))) {
    record("mem_alloc " + std::to_string(size) + " (out of memory)");
    return kErrOutOfMemory;
  }
  dptr = next_address_;
  next_address_ += charged(size) + kAlign;  // a gap catches overruns
  memory_.emplace(dptr, std::vector<std::uint8_t>(size));
  record("mem_alloc " + std::to_string(size));
  return 0;
}
int HostBackend::mem_free(u64 dptr) {
  auto it = memory_.find(dptr);
  if (it == memory_.end()) return kErrInvalidValue;
  used_ -= charged(it->second.size());
  record("mem_free " + std::to_string(it->second.size()));
  memory_.erase(it);
  return 0;
}
int HostBackend::mem_get_info(u64& free, u64& total) {
  total = kTotalMemory;
  free = kTotalMemory - used_;
  return 0;
}
int HostBackend::memcpy_htod(u64 dst, const void* src, u64 n, u64) {
  auto* d = span(dst, n);
  if (d == nullptr) return kErrInvalidValue;
  std::memcpy(d, src, n);
  record("memcpy_htod " + std::to_string(n));
  return 0;
}
int HostBackend::memcpy_dtoh(void* dst, u64 src, u64 n, u64) {
  auto* s = span(src, n);
  if (s == nullptr) return kErrInvalidValue;
  std::memcpy(dst, s, n);
  record("memcpy_dtoh " + std::to_string(n));
  return 0;
}
int HostBackend::memcpy_dtod(u64 dst, u64 src, u64 n, u64) {
  auto* d = span(dst, n);
  auto* s = span(src, n);
  if (d == nullptr || s == nullptr) return kErrInvalidValue;
  std::memmove(d, s, n);
  record("memcpy_dtod " + std::to_string(n));
  return 0;
}
int HostBackend::memset(u64 dst, std::uint32_t value, std::uint32_t elem, u64 count, u64) {
  if (count > kTotalMemory) return kErrInvalidValue;
  auto* d = span(dst, count * elem);
  if (d == nullptr) return kErrInvalidValue;
  for (u64 i = 0; i < count; ++i) std::memcpy(d + i * elem, &value, elem);
  record("memset " + std::to_string(elem) + "x" + std::to_string(count));
  return 0;
}

int HostBackend::module_load(const void*, std::size_t size, u64& module) {
  if (int rc = new_handle(modules_, "", 0, module); rc != 0) return rc;
  record("module_load " + std::to_string(size));
  return 0;
}
int HostBackend::module_unload(u64 module) {
  drop_owned(module);
  return drop(modules_, module, "module_unload");
}
int HostBackend::module_get_function(u64 module, const std::string& name, u64& fn) {
  if (!modules_.count(module)) return kErrInvalidHandle;
  if (int rc = named_handle(functions_, name, module, fn); rc != 0) return rc;
  record("module_get_function " + name);
  return 0;
}
int HostBackend::module_get_global(u64 module, const std::string& name, u64& dptr, u64& size) {
  if (!modules_.count(module)) return kErrInvalidHandle;
  record("module_get_global " + name);
  return global(module, name, dptr, size);
}
// The double reads no module contents, so it cannot know a global's size:
// each (module, name) gets one zeroed buffer of kGlobalSize bytes, freed with its module.
int HostBackend::global(u64 owner, const std::string& name, u64& dptr, u64& size) {
  auto key = std::pair(owner, name);
  auto it = globals_.find(key);
  if (it == globals_.end()) {
    if (!charge(kGlobalSize + name.size())) return kErrOutOfMemory;
    u64 p = next_address_;
    next_address_ += kGlobalSize + kAlign;
    memory_.emplace(p, std::vector<std::uint8_t>(kGlobalSize));
    it = globals_.emplace(key, p).first;
  }
  dptr = it->second;
  size = kGlobalSize;
  return 0;
}
int HostBackend::library_load(const void*, std::size_t size, u64& library) {
  if (int rc = new_handle(libraries_, "", 0, library); rc != 0) return rc;
  record("library_load " + std::to_string(size));
  return 0;
}
int HostBackend::library_unload(u64 library) {
  drop_owned(library);
  return drop(libraries_, library, "library_unload");
}
int HostBackend::library_get_kernel(u64 library, const std::string& name, u64& kernel) {
  if (!libraries_.count(library)) return kErrInvalidHandle;
  if (int rc = named_handle(kernels_, name, library, kernel); rc != 0) return rc;
  record("library_get_kernel " + name);
  return 0;
}
int HostBackend::library_get_global(u64 library, const std::string& name, u64& dptr, u64& size) {
  if (!libraries_.count(library)) return kErrInvalidHandle;
  record("library_get_global " + name);
  return global(library, name, dptr, size);
}
int HostBackend::kernel_get_function(u64 kernel, u64& fn) {
  auto it = kernels_.find(kernel);
  if (it == kernels_.end()) return kErrInvalidHandle;
  return named_handle(functions_, it->second.name, kernel, fn);
}
int HostBackend::param_info(u64 fn, bool, std::vector<wire::Param>& out) {
  std::string name;
  if (auto it = functions_.find(fn); it != functions_.end()) name = it->second.name;
  else if (auto k = kernels_.find(fn); k != kernels_.end()) name = k->second.name;
  else return kErrInvalidHandle;
  const HostKernel* k = find_host_kernel(name);
  out = k != nullptr ? k->params : std::vector<wire::Param>{};  // the double reads no module metadata
  return 0;
}
int HostBackend::func_get_attribute(u64 fn, int, int& value) {
  if (!functions_.count(fn) && !kernels_.count(fn)) return kErrInvalidHandle;
  value = 0;
  return 0;
}
int HostBackend::func_set_attribute(u64 fn, int, int) {
  if (!functions_.count(fn) && !kernels_.count(fn)) return kErrInvalidHandle;
  return 0;
}
int HostBackend::occupancy(u64 fn, int block_size, u64, unsigned, int& blocks) {
  if (!functions_.count(fn) && !kernels_.count(fn)) return kErrInvalidHandle;
  if (block_size <= 0) return kErrInvalidValue;
  blocks = std::max(1, 2048 / block_size);  // threads per SM of the described device
  return 0;
}
int HostBackend::occupancy_clusters(u64 fn, const std::uint32_t*, int& clusters) {
  if (!functions_.count(fn) && !kernels_.count(fn)) return kErrInvalidHandle;
  clusters = 1;
  return 0;
}
int HostBackend::launch(u64 fn, const std::uint32_t grid[3], const std::uint32_t block[3], std::uint32_t, u64,
                        const void* params, std::size_t params_size) {
  std::string name;
  if (auto it = functions_.find(fn); it != functions_.end()) name = it->second.name;
  else if (auto k = kernels_.find(fn); k != kernels_.end()) name = k->second.name;
  else return kErrInvalidHandle;
  std::string hex;
  for (std::size_t i = 0; i < std::min(params_size, kMaxLoggedParams); ++i) {
    static const char* digits = "0123456789abcdef";
    auto b = static_cast<const std::uint8_t*>(params)[i];
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  record("launch " + name + " grid " + std::to_string(grid[0]) + " block " + std::to_string(block[0]) + " params " +
         std::to_string(params_size) + (hex.empty() ? "" : " " + hex) +
         (params_size > kMaxLoggedParams ? "..." : ""));
  const HostKernel* kernel = find_host_kernel(name);
  if (kernel == nullptr) return kErrNotSupported;  // a kernel the double cannot run
  std::size_t needed = 0;
  for (const auto& p : kernel->params) needed = std::max<std::size_t>(needed, p.offset + p.size);
  if (params_size < needed) return kErrInvalidValue;
  HostLaunch l{{grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]},
               static_cast<const std::uint8_t*>(params), params_size};
  return kernel->run(l, [this](u64 p, u64 n) { return span(p, n); });
}
int HostBackend::stream_create(unsigned, int, u64& stream) {
  if (int rc = new_handle(streams_, "", 0, stream); rc != 0) return rc;
  record("stream_create");
  return 0;
}
int HostBackend::stream_destroy(u64 stream) { return drop(streams_, stream, "stream_destroy"); }
int HostBackend::stream_synchronize(u64) {
  record("stream_synchronize");
  return 0;
}
int HostBackend::stream_query(u64) { return 0; }
int HostBackend::stream_wait_event(u64, u64 event, unsigned) {
  return events_.count(event) ? 0 : kErrInvalidHandle;
}
int HostBackend::event_create(unsigned, u64& event) {
  if (int rc = new_handle(events_, "", 0, event); rc != 0) return rc;
  record("event_create");
  return 0;
}
int HostBackend::event_destroy(u64 event) { return drop(events_, event, "event_destroy"); }
int HostBackend::event_record(u64 event, u64) {
  if (!events_.count(event)) return kErrInvalidHandle;
  record("event_record");
  return 0;
}
int HostBackend::event_synchronize(u64 event) { return events_.count(event) ? 0 : kErrInvalidHandle; }
int HostBackend::event_query(u64 event) { return events_.count(event) ? 0 : kErrInvalidHandle; }
int HostBackend::event_elapsed(u64 a, u64 b, float& ms) {
  if (!events_.count(a) || !events_.count(b)) return kErrInvalidHandle;
  ms = 0;
  return 0;
}

}  // namespace runsnack::cuda
