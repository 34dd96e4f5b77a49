// ClientSession::execute: each wire op carried out on the Backend, handles checked and given out.
#include "cuda/server/client_session.hpp"

#include <cstring>

namespace runsnack::cuda {

using wire::Op;

int ClientSession::execute(Op op, wire::Reader& r, wire::Writer& w) {
  switch (op) {
    case Op::Hello: {
      std::uint32_t version = r.u32();
      if (version != wire::kProtocolVersion) return kErrNotSupported;
      int rc = b_.init();
      int driver = 0;
      std::vector<wire::DeviceInfo> devs;
      if (rc == 0) rc = b_.driver_version(driver);
      if (rc == 0) rc = b_.devices(devs);
      if (rc != 0) return rc;
      w.u32(wire::kProtocolVersion);
      w.i32(driver);
      w.u32(static_cast<std::uint32_t>(devs.size()));
      for (const auto& d : devs) wire::write_device(w, d);
      return 0;
    }
    case Op::CtxCreate: {
      unsigned flags = r.u32();
      int dev = r.i32();
      if (r.failed()) return 0;
      std::uint64_t ctx = 0;
      int rc = b_.ctx_create(flags, dev, ctx);
      if (rc != 0) return rc;
      auto h = handles_.add(Kind::Context, ctx);
      current_ = h;  // cuCtxCreate makes the new context current
      w.u64(h);
      return 0;
    }
    case Op::PrimaryCtxRetain: {
      int dev = r.i32();
      if (r.failed()) return 0;
      std::uint64_t ctx = 0;
      int rc = b_.primary_ctx_retain(dev, ctx);
      if (rc != 0) return rc;
      ++primary_retains_[dev];
      auto h = handles_.find_value(Kind::PrimaryContext, ctx);
      w.u64(h ? *h : handles_.add(Kind::PrimaryContext, ctx, static_cast<std::uint64_t>(dev)));
      return 0;
    }
    case Op::PrimaryCtxRelease: {
      int dev = r.i32();
      if (r.failed()) return 0;
      auto it = primary_retains_.find(dev);
      if (it == primary_retains_.end() || it->second == 0) return kErrInvalidContext;
      --it->second;
      return b_.primary_ctx_release(dev);
    }
    case Op::CtxDestroy: {
      std::uint64_t h = r.u64(), v = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Context, v); rc != 0) return rc;
      handles_.remove(h, Kind::Context);
      if (current_ == h) current_ = 0;
      return b_.ctx_destroy(v);
    }
    case Op::CtxSynchronize: {
      std::uint64_t ctx = r.u64();
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      return b_.ctx_synchronize();
    }
    case Op::Sync:
      return 0;
    case Op::MemAlloc: {
      std::uint64_t ctx = r.u64(), size = r.u64(), p = 0;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = b_.mem_alloc(size, p); rc != 0) return rc;
      memory_.insert(p);
      w.u64(p);
      return 0;
    }
    case Op::MemFree: {
      std::uint64_t p = r.u64();
      if (r.failed()) return 0;
      if (memory_.erase(p) == 0) return kErrInvalidValue;
      return b_.mem_free(p);
    }
    case Op::MemGetInfo: {
      std::uint64_t ctx = r.u64(), free = 0, total = 0;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = b_.mem_get_info(free, total); rc != 0) return rc;
      w.u64(free);
      w.u64(total);
      return 0;
    }
    case Op::MemcpyHtoD: {
      std::uint64_t ctx = r.u64(), dst = r.u64(), sh = r.u64(), s = 0;
      auto data = r.rest();
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      return b_.memcpy_htod(dst, data.data(), data.size(), s);
    }
    case Op::MemcpyDtoH: {
      std::uint64_t ctx = r.u64(), src = r.u64(), size = r.u64(), sh = r.u64(), s = 0;
      if (r.failed()) return 0;
      if (size > wire::kChunk) return kErrInvalidValue;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      std::vector<std::uint8_t> buf(size);
      if (int rc = b_.memcpy_dtoh(buf.data(), src, size, s); rc != 0) return rc;
      w.raw(buf.data(), buf.size());
      return 0;
    }
    case Op::MemcpyDtoD: {
      std::uint64_t ctx = r.u64(), dst = r.u64(), src = r.u64(), size = r.u64(), sh = r.u64(), s = 0;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      return b_.memcpy_dtod(dst, src, size, s);
    }
    case Op::Memset: {
      std::uint64_t ctx = r.u64(), dst = r.u64();
      std::uint32_t value = r.u32(), elem = r.u32();
      std::uint64_t count = r.u64(), sh = r.u64(), s = 0;
      if (r.failed()) return 0;
      if (elem != 1 && elem != 2 && elem != 4) return kErrInvalidValue;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      return b_.memset(dst, value, elem, count, s);
    }
    case Op::ImageBegin: {
      std::uint64_t size = r.u64();
      if (r.failed()) return 0;
      image_.clear();
      image_expected_ = 0;
      if (size == 0 || size > wire::kMaxImage) return kErrInvalidValue;
      image_expected_ = size;
      image_.reserve(size);
      return 0;
    }
    case Op::ImageChunk: {
      auto data = r.rest();
      if (image_.size() + data.size() > image_expected_) return kErrInvalidImage;
      image_.insert(image_.end(), data.begin(), data.end());
      return 0;
    }
    case Op::ModuleLoad: {
      std::uint64_t ctx = r.u64(), m = 0;
      if (r.failed()) return 0;
      const std::vector<std::uint8_t>* image = nullptr;
      if (int rc = staged(image); rc != 0) return rc;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      int rc = b_.module_load(image->data(), image->size(), m);
      image_.clear();
      image_.shrink_to_fit();
      if (rc != 0) return rc;
      w.u64(handles_.add(Kind::Module, m, current_));
      return 0;
    }
    case Op::ModuleUnload: {
      std::uint64_t h = r.u64(), m = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Module, m); rc != 0) return rc;
      handles_.remove(h, Kind::Module);
      return b_.module_unload(m);
    }
    case Op::ModuleGetFunction: {
      std::uint64_t h = r.u64(), m = 0, fn = 0;
      std::string name = r.str();
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Module, m); rc != 0) return rc;
      if (int rc = b_.module_get_function(m, name, fn); rc != 0) return rc;
      w.u64(give(Kind::Function, fn));
      write_params(w, fn, false);
      return 0;
    }
    case Op::ModuleGetGlobal: {
      std::uint64_t h = r.u64(), m = 0, p = 0, size = 0;
      std::string name = r.str();
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Module, m); rc != 0) return rc;
      if (int rc = b_.module_get_global(m, name, p, size); rc != 0) return rc;
      w.u64(p);
      w.u64(size);
      return 0;
    }
    case Op::LibraryLoad: {
      std::uint64_t lib = 0;
      const std::vector<std::uint8_t>* image = nullptr;
      if (int rc = staged(image); rc != 0) return rc;
      int rc = b_.library_load(image->data(), image->size(), lib);
      image_.clear();
      image_.shrink_to_fit();
      if (rc != 0) return rc;
      w.u64(handles_.add(Kind::Library, lib));
      return 0;
    }
    case Op::LibraryUnload: {
      std::uint64_t h = r.u64(), lib = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Library, lib); rc != 0) return rc;
      handles_.remove(h, Kind::Library);
      return b_.library_unload(lib);
    }
    case Op::LibraryGetKernel: {
      std::uint64_t h = r.u64(), lib = 0, k = 0;
      std::string name = r.str();
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Library, lib); rc != 0) return rc;
      if (int rc = b_.library_get_kernel(lib, name, k); rc != 0) return rc;
      w.u64(give(Kind::Kernel, k));
      write_params(w, k, true);
      return 0;
    }
    case Op::LibraryGetGlobal: {
      std::uint64_t ctx = r.u64(), h = r.u64(), lib = 0, p = 0, size = 0;
      std::string name = r.str();
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = lookup(h, Kind::Library, lib); rc != 0) return rc;
      if (int rc = b_.library_get_global(lib, name, p, size); rc != 0) return rc;
      w.u64(p);
      w.u64(size);
      return 0;
    }
    case Op::KernelGetFunction: {
      std::uint64_t ctx = r.u64(), h = r.u64(), k = 0, fn = 0;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = lookup(h, Kind::Kernel, k); rc != 0) return rc;
      if (int rc = b_.kernel_get_function(k, fn); rc != 0) return rc;
      w.u64(give(Kind::Function, fn));
      return 0;
    }
    case Op::FuncGetAttribute: {
      std::uint64_t h = r.u64(), fn = 0;
      int attrib = r.i32(), value = 0;
      bool is_kernel = false;
      if (r.failed()) return 0;
      if (int rc = function(h, fn, is_kernel); rc != 0) return rc;
      if (int rc = b_.func_get_attribute(fn, attrib, value); rc != 0) return rc;
      w.i32(value);
      return 0;
    }
    case Op::Occupancy: {
      std::uint64_t h = r.u64(), fn = 0;
      int block_size = r.i32(), blocks = 0;
      std::uint64_t smem = r.u64();
      unsigned flags = r.u32();
      bool is_kernel = false;
      if (r.failed()) return 0;
      if (int rc = function(h, fn, is_kernel); rc != 0) return rc;
      if (int rc = b_.occupancy(fn, block_size, smem, flags, blocks); rc != 0) return rc;
      w.i32(blocks);
      return 0;
    }
    case Op::OccupancyClusters: {
      std::uint64_t h = r.u64(), fn = 0;
      std::uint32_t dims[10];
      for (auto& d : dims) d = r.u32();
      int clusters = 0;
      bool is_kernel = false;
      if (r.failed()) return 0;
      if (int rc = function(h, fn, is_kernel); rc != 0) return rc;
      if (int rc = b_.occupancy_clusters(fn, dims, clusters); rc != 0) return rc;
      w.i32(clusters);
      return 0;
    }
    case Op::FuncSetAttribute: {
      std::uint64_t h = r.u64(), fn = 0;
      int attrib = r.i32(), value = r.i32();
      bool is_kernel = false;
      if (r.failed()) return 0;
      if (int rc = function(h, fn, is_kernel); rc != 0) return rc;
      return b_.func_set_attribute(fn, attrib, value);
    }
    case Op::Launch: {
      std::uint64_t ctx = r.u64(), h = r.u64(), fn = 0, s = 0;
      std::uint32_t grid[3], block[3];
      for (auto& g : grid) g = r.u32();
      for (auto& b : block) b = r.u32();
      std::uint32_t shmem = r.u32();
      std::uint64_t sh = r.u64();
      auto params = r.rest();
      bool is_kernel = false;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = function(h, fn, is_kernel); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      return b_.launch(fn, grid, block, shmem, s, params.data(), params.size());
    }
    case Op::StreamCreate: {
      std::uint64_t ctx = r.u64(), s = 0;
      unsigned flags = r.u32();
      int prio = r.i32();
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = b_.stream_create(flags, prio, s); rc != 0) return rc;
      w.u64(handles_.add(Kind::Stream, s, current_));
      return 0;
    }
    case Op::StreamDestroy: {
      std::uint64_t h = r.u64(), s = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Stream, s); rc != 0) return rc;
      handles_.remove(h, Kind::Stream);
      return b_.stream_destroy(s);
    }
    case Op::StreamSynchronize:
    case Op::StreamQuery: {
      std::uint64_t ctx = r.u64(), h = r.u64(), s = 0;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = stream(h, s); rc != 0) return rc;
      return op == Op::StreamQuery ? b_.stream_query(s) : b_.stream_synchronize(s);
    }
    case Op::StreamWaitEvent: {
      std::uint64_t ctx = r.u64(), sh = r.u64(), eh = r.u64(), s = 0, e = 0;
      unsigned flags = r.u32();
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      if (int rc = lookup(eh, Kind::Event, e); rc != 0) return rc;
      return b_.stream_wait_event(s, e, flags);
    }
    case Op::EventCreate: {
      std::uint64_t ctx = r.u64(), e = 0;
      unsigned flags = r.u32();
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = b_.event_create(flags, e); rc != 0) return rc;
      w.u64(handles_.add(Kind::Event, e, current_));
      return 0;
    }
    case Op::EventDestroy: {
      std::uint64_t h = r.u64(), e = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Event, e); rc != 0) return rc;
      handles_.remove(h, Kind::Event);
      return b_.event_destroy(e);
    }
    case Op::EventRecord: {
      std::uint64_t ctx = r.u64(), eh = r.u64(), sh = r.u64(), e = 0, s = 0;
      if (r.failed()) return 0;
      if (int rc = use_ctx(ctx); rc != 0) return rc;
      if (int rc = lookup(eh, Kind::Event, e); rc != 0) return rc;
      if (int rc = stream(sh, s); rc != 0) return rc;
      return b_.event_record(e, s);
    }
    case Op::EventSynchronize:
    case Op::EventQuery: {
      std::uint64_t h = r.u64(), e = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(h, Kind::Event, e); rc != 0) return rc;
      return op == Op::EventQuery ? b_.event_query(e) : b_.event_synchronize(e);
    }
    case Op::EventElapsedTime: {
      std::uint64_t a = r.u64(), b = r.u64(), ea = 0, eb = 0;
      float ms = 0;
      if (r.failed()) return 0;
      if (int rc = lookup(a, Kind::Event, ea); rc != 0) return rc;
      if (int rc = lookup(b, Kind::Event, eb); rc != 0) return rc;
      if (int rc = b_.event_elapsed(ea, eb, ms); rc != 0) return rc;
      w.f32(ms);
      return 0;
    }
    case Op::Reply:
    case Op::Output:
      break;
  }
  return kErrNotSupported;
}

}  // namespace runsnack::cuda
