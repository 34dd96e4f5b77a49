#include "cuda/server/serve.hpp"

#include "cuda/server/driver_backend.hpp"
#include "cuda/server/handles.hpp"
#include "cuda/server/host_backend.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace runsnack::cuda {
namespace {

using wire::Op;

bool write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

// 0: got n bytes; 1: EOF before the first byte; -1: error or EOF mid-way.
int read_all(int fd, std::uint8_t* p, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return got == 0 ? 1 : -1;
    if (r < 0) return -1;
    got += static_cast<std::size_t>(r);
  }
  return 0;
}

// A frame's payload as it arrives: the buffer grows (at most doubling) only
// once what it holds has come, so a client announcing kMaxPayload and
// stalling makes us hold 64 KiB. The buffer is reused between frames.
int read_payload(int fd, std::uint32_t length, std::vector<std::uint8_t>& payload) {
  std::size_t got = 0;
  while (got < length) {
    std::size_t step = std::min<std::size_t>(length - got, std::max<std::size_t>(got, 64 * 1024));
    if (payload.size() < got + step) payload.resize(got + step);
    if (read_all(fd, payload.data() + got, step) != 0) return -1;
    got += step;
  }
  payload.resize(length);
  return 0;
}

// Makes fd 1 a pipe and collects what is written to it (the driver prints
// device printf output on stdout at synchronisation points). A thread keeps
// the pipe drained so a writer never blocks; take() empties it on demand, so
// output printed before a reply is sent ahead of that reply.
class StdoutCapture {
 public:
  StdoutCapture() {
    int p[2];
    if (::pipe(p) != 0) return;
    std::fflush(stdout);
    saved_ = ::dup(1);
    ::dup2(p[1], 1);
    ::close(p[1]);
    ::fcntl(p[0], F_SETFL, O_NONBLOCK);
    read_ = p[0];
    thread_ = std::thread([this] { run(); });
  }
  ~StdoutCapture() {
    if (read_ < 0) return;
    std::fflush(stdout);
    ::dup2(saved_, 1);  // closes the pipe's last write end: run() sees EOF
    ::close(saved_);
    thread_.join();
    ::close(read_);
  }
  std::vector<std::uint8_t> take() {
    std::fflush(stdout);
    std::lock_guard lock(mutex_);
    drain_locked();
    return std::exchange(pending_, {});
  }

 private:
  // Reads what is there; false at EOF.
  bool drain_locked() {
    std::uint8_t buf[65536];
    for (;;) {
      ssize_t n = ::read(read_, buf, sizeof buf);
      if (n > 0) {
        pending_.insert(pending_.end(), buf, buf + n);
        continue;
      }
      return n != 0;  // n < 0: EAGAIN (nothing more now) or EINTR
    }
  }
  void run() {
    for (;;) {
      pollfd p{read_, POLLIN, 0};
      if (::poll(&p, 1, -1) < 0 && errno != EINTR) return;
      std::lock_guard lock(mutex_);
      if (!drain_locked()) return;
    }
  }
  std::mutex mutex_;
  std::vector<std::uint8_t> pending_;
  int read_ = -1;
  int saved_ = -1;
  std::thread thread_;
};

class Session {
 public:
  Session(int fd, Backend& b, StdoutCapture* capture) : fd_(fd), b_(b), capture_(capture) {}
  ~Session() { cleanup(); }

  // Executes one request; returns an error message for a malformed one.
  std::string handle(const wire::Header& h, const std::uint8_t* payload) {
    wire::Reader r(payload, h.length);
    std::vector<std::uint8_t> out;
    wire::Writer w(out);
    w.frame(Op::Reply, 0, h.seq);
    w.i32(0);  // result, patched below
    int rc = 0;
    bool sync = h.flags & wire::kFlagReply;
    if (sync && latched_ != 0) {
      // An earlier fire-and-forget request failed: report it now, run nothing.
      rc = latched_;
      latched_ = 0;
      out.resize(wire::kHeaderSize + 4);
    } else {
      rc = execute(h.op, r, w);
      if (r.failed() || !r.at_end()) {
        return std::string("cuda wire: malformed ") + wire::op_name(h.op) + " request";
      }
      if (rc != 0) out.resize(wire::kHeaderSize + 4);  // no results after a failure
    }
    if (!sync) {
      if (rc != 0 && latched_ == 0) latched_ = rc;
      return {};
    }
    std::memcpy(out.data() + wire::kHeaderSize, &rc, 4);
    w.finish();
    if (capture_ != nullptr) {
      // Device printf output first, so the client sees it before this reply.
      auto printed = capture_->take();
      std::vector<std::uint8_t> frames;
      wire::Writer o(frames);
      for (std::size_t off = 0; off < printed.size(); off += wire::kChunk) {
        o.frame(Op::Output, 0, 0);
        o.raw(printed.data() + off, std::min(wire::kChunk, printed.size() - off));
        o.finish();
      }
      if (!write_all(fd_, frames.data(), frames.size())) return "cuda server: the client went away";
    }
    if (!write_all(fd_, out.data(), out.size())) return "cuda server: the client went away";
    return {};
  }

 private:
  // Makes the request's context current; returns its backend value's result.
  int use_ctx(std::uint64_t ctx) {
    if (ctx == 0) return 0;
    const auto* e = handles_.get(ctx, Kind::Context);
    if (e == nullptr) e = handles_.get(ctx, Kind::PrimaryContext);
    if (e == nullptr) return kErrInvalidContext;
    if (current_ == ctx) return 0;
    int rc = b_.set_current(e->value);
    if (rc == 0) current_ = ctx;
    return rc;
  }
  int stream(std::uint64_t h, std::uint64_t& out) const {
    if (h <= 2) {
      out = h;
      return 0;
    }
    const auto* e = handles_.get(h, Kind::Stream);
    if (e == nullptr) return kErrInvalidHandle;
    out = e->value;
    return 0;
  }
  int lookup(std::uint64_t h, Kind k, std::uint64_t& out) const {
    const auto* e = handles_.get(h, k);
    if (e == nullptr) return kErrInvalidHandle;
    out = e->value;
    return 0;
  }
  int function(std::uint64_t h, std::uint64_t& out, bool& is_kernel) const {
    is_kernel = false;
    if (lookup(h, Kind::Function, out) == 0) return 0;
    is_kernel = true;
    return lookup(h, Kind::Kernel, out);
  }
  std::uint64_t give(Kind k, std::uint64_t value) {
    if (auto h = handles_.find_value(k, value)) return *h;
    return handles_.add(k, value, current_);
  }
  void write_params(wire::Writer& w, std::uint64_t fn, bool is_kernel) {
    std::vector<wire::Param> params;
    // A backend that cannot tell the layout reports none; the client then
    // sends an empty buffer and the launch fails on the server, not silently.
    if (b_.param_info(fn, is_kernel, params) != 0) params.clear();
    w.array(params);
  }
  int staged(const std::vector<std::uint8_t>*& image) {
    if (image_.size() != image_expected_ || image_.empty()) return kErrInvalidImage;
    image = &image_;
    return 0;
  }

  int execute(Op op, wire::Reader& r, wire::Writer& w) {
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

  // Frees what this connection made, dependents first.
  void cleanup() {
    for (Kind k : {Kind::Event, Kind::Stream}) {
      for (const auto& [h, e] : handles_.of_kind(k)) {
        use_ctx(e.owner);
        if (k == Kind::Event) b_.event_destroy(e.value);
        else b_.stream_destroy(e.value);
      }
    }
    for (auto p : memory_) b_.mem_free(p);
    memory_.clear();
    for (const auto& [h, e] : handles_.of_kind(Kind::Module)) b_.module_unload(e.value);
    for (const auto& [h, e] : handles_.of_kind(Kind::Library)) b_.library_unload(e.value);
    for (const auto& [h, e] : handles_.of_kind(Kind::Context)) b_.ctx_destroy(e.value);
    for (auto& [dev, n] : primary_retains_) {
      for (; n > 0; --n) b_.primary_ctx_release(dev);
    }
    handles_ = HandleTable{};
  }

  int fd_;
  Backend& b_;
  HandleTable handles_;
  std::set<std::uint64_t> memory_;
  std::map<int, int> primary_retains_;
  std::uint64_t current_ = 0;
  int latched_ = 0;
  std::vector<std::uint8_t> image_;
  std::uint64_t image_expected_ = 0;
  StdoutCapture* capture_;
};

}  // namespace

int serve_cuda(int fd, Backend& backend, const ServeOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);
  std::unique_ptr<StdoutCapture> capture;
  if (options.capture_stdout) capture = std::make_unique<StdoutCapture>();
  Session session(fd, backend, capture.get());
  std::vector<std::uint8_t> payload;
  for (;;) {
    std::uint8_t head[wire::kHeaderSize];
    int rc = read_all(fd, head, sizeof head);
    if (rc == 1) return 0;
    if (rc < 0) {
      std::fprintf(stderr, "runsnack cuda-server: connection lost mid-frame\n");
      return 1;
    }
    wire::Header h;
    std::string err = wire::decode_header(head, h);
    if (err.empty() && (h.op == Op::Reply || h.op == Op::Output)) err = "cuda wire: a client sent a server frame";
    if (!err.empty()) {
      std::fprintf(stderr, "runsnack cuda-server: %s\n", err.c_str());
      return 1;
    }
    if (read_payload(fd, h.length, payload) != 0) {
      std::fprintf(stderr, "runsnack cuda-server: connection lost mid-frame\n");
      return 1;
    }
    err = session.handle(h, payload.data());
    if (!err.empty()) {
      std::fprintf(stderr, "runsnack cuda-server: %s\n", err.c_str());
      return 1;
    }
  }
}

std::unique_ptr<Backend> make_backend(const std::string& name) {
  if (name == "driver") return std::make_unique<DriverBackend>();
  if (name == "host") return std::make_unique<HostBackend>();
  return nullptr;
}

}  // namespace runsnack::cuda
