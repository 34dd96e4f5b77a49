#include "cuda/shim/client.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace runsnack::cuda::shim {
namespace {

constexpr int kErrNoDevice = 100;
constexpr int kErrNotInitialized = 3;
constexpr int kErrUnknown = 999;
// Coalesced fire-and-forget frames are sent once this many bytes wait.
constexpr std::size_t kFlushAt = 256 * 1024;

struct Conn {
  std::mutex mutex;
  int fd = -1;
  int init_result = -1;  // -1: not tried yet
  std::uint32_t seq = 0;
  std::vector<std::uint8_t> out;
  std::vector<wire::DeviceInfo> devices;
  int driver_version = 0;
  // RUNSNACK_CUDA_STATS=1 prints these at exit.
  std::uint64_t sync_calls = 0, posted = 0, bytes_sent = 0, bytes_received = 0;
};

Conn& conn() {
  static Conn* c = new Conn;  // never destroyed: atexit handlers may still call the driver
  return *c;
}

bool write_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// A frame's payload as it arrives (see read_payload in server/serve.cpp): a
// server announcing kMaxPayload and stalling makes us hold 64 KiB.
bool read_payload(int fd, std::uint32_t length, std::vector<std::uint8_t>& payload) {
  std::size_t got = 0;
  while (got < length) {
    std::size_t step = std::min<std::size_t>(length - got, std::max<std::size_t>(got, 64 * 1024));
    if (payload.size() < got + step) payload.resize(got + step);
    if (!read_all(fd, payload.data() + got, step)) return false;
    got += step;
  }
  payload.resize(length);
  return true;
}

void lost(Conn& c) {
  if (c.fd >= 0) {
    std::fprintf(stderr, "runsnack cuda: lost the connection to the remote GPU\n");
    ::close(c.fd);
    c.fd = -1;
  }
}

bool flush_locked(Conn& c) {
  if (c.out.empty()) return c.fd >= 0;
  c.bytes_sent += c.out.size();
  bool ok = c.fd >= 0 && write_all(c.fd, c.out.data(), c.out.size());
  c.out.clear();
  if (!ok) lost(c);
  return ok;
}

// Waits for the reply to `seq`, writing Output frames (device printf) to stdout.
int await_locked(Conn& c, std::uint32_t seq, std::vector<std::uint8_t>* reply) {
  std::vector<std::uint8_t> payload;
  for (;;) {
    std::uint8_t head[wire::kHeaderSize];
    wire::Header h;
    if (c.fd < 0 || !read_all(c.fd, head, sizeof head) || !wire::decode_header(head, h).empty()) {
      lost(c);
      return kErrUnknown;
    }
    if (!read_payload(c.fd, h.length, payload)) {
      lost(c);
      return kErrUnknown;
    }
    c.bytes_received += wire::kHeaderSize + h.length;
    if (h.op == wire::Op::Output) {
      std::fwrite(payload.data(), 1, payload.size(), stdout);
      std::fflush(stdout);
      continue;
    }
    if (h.op != wire::Op::Reply || h.seq != seq || h.length < 4) {
      std::fprintf(stderr, "runsnack cuda: unexpected frame from the server\n");
      lost(c);
      return kErrUnknown;
    }
    int rc = 0;
    std::memcpy(&rc, payload.data(), 4);
    if (reply != nullptr) reply->assign(payload.begin() + 4, payload.end());
    return rc;
  }
}

int connect_server() {
  const char* path = std::getenv("RUNSNACK_CUDA_SOCKET");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr,
                 "runsnack cuda: no remote GPU (RUNSNACK_CUDA_SOCKET is not set); run the program with "
                 "`runsnack cuda LINK -- CMD`\n");
    return -1;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(path) >= sizeof addr.sun_path) {
    std::fprintf(stderr, "runsnack cuda: socket path too long: %s\n", path);
    return -1;
  }
  std::strcpy(addr.sun_path, path);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::fprintf(stderr, "runsnack cuda: cannot connect to %s: %s\n", path, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

thread_local std::vector<std::uint64_t> t_ctx;

void print_stats() {
  Conn& c = conn();
  std::lock_guard lock(c.mutex);
  std::fprintf(stderr,
               "runsnack cuda stats: %llu synchronous round trips, %llu fire-and-forget requests, %llu bytes sent, "
               "%llu bytes received\n",
               static_cast<unsigned long long>(c.sync_calls), static_cast<unsigned long long>(c.posted),
               static_cast<unsigned long long>(c.bytes_sent), static_cast<unsigned long long>(c.bytes_received));
}

}  // namespace

int init() {
  Conn& c = conn();
  std::lock_guard lock(c.mutex);
  if (c.init_result >= 0) return c.init_result;
  c.fd = connect_server();
  if (c.fd < 0) return c.init_result = kErrNoDevice;
  if (const char* s = std::getenv("RUNSNACK_CUDA_STATS"); s != nullptr && std::strcmp(s, "1") == 0) {
    std::atexit(print_stats);
  }
  ++c.sync_calls;  // Hello
  wire::Writer w(c.out);
  std::uint32_t seq = ++c.seq;
  w.frame(wire::Op::Hello, wire::kFlagReply, seq);
  w.u32(wire::kProtocolVersion);
  w.finish();
  std::vector<std::uint8_t> reply;
  int rc = flush_locked(c) ? await_locked(c, seq, &reply) : kErrUnknown;
  if (rc == 0) {
    wire::Reader r(reply.data(), reply.size());
    r.u32();
    c.driver_version = r.i32();
    std::uint32_t n = r.u32();
    for (std::uint32_t i = 0; i < n && !r.failed() && i < 64; ++i) c.devices.push_back(wire::read_device(r));
    if (r.failed()) rc = kErrUnknown;
  }
  if (rc == 0 && c.devices.empty()) rc = kErrNoDevice;
  return c.init_result = rc;
}

bool initialised() { return conn().init_result == 0; }
const std::vector<wire::DeviceInfo>& devices() { return conn().devices; }
int driver_version() { return conn().driver_version; }

int call(wire::Op op, const Fill& fill, std::vector<std::uint8_t>* reply) {
  Conn& c = conn();
  std::lock_guard lock(c.mutex);
  if (c.init_result != 0) return kErrNotInitialized;
  wire::Writer w(c.out);
  std::uint32_t seq = ++c.seq;
  w.frame(op, wire::kFlagReply, seq);
  fill(w);
  w.finish();
  ++c.sync_calls;
  if (!flush_locked(c)) return kErrUnknown;
  int rc = await_locked(c, seq, reply);
  if (rc != 0 && trace()) std::fprintf(stderr, "runsnack cuda trace: %s -> %d\n", wire::op_name(op), rc);
  return rc;
}

int call_many(wire::Op op, std::size_t n, const std::function<void(std::size_t, wire::Writer&)>& fill,
              const std::function<void(std::size_t, const std::vector<std::uint8_t>&)>& on_reply) {
  Conn& c = conn();
  std::lock_guard lock(c.mutex);
  if (c.init_result != 0) return kErrNotInitialized;
  wire::Writer w(c.out);
  std::uint32_t first = c.seq + 1;
  for (std::size_t i = 0; i < n; ++i) {
    w.frame(op, wire::kFlagReply, ++c.seq);
    fill(i, w);
    w.finish();
  }
  ++c.sync_calls;
  if (!flush_locked(c)) return kErrUnknown;
  int result = 0;
  std::vector<std::uint8_t> reply;
  // Every reply is read, even after a failure, so the stream stays in step.
  for (std::size_t i = 0; i < n; ++i) {
    int rc = await_locked(c, first + static_cast<std::uint32_t>(i), &reply);
    if (rc == kErrUnknown && c.fd < 0) return rc;
    if (rc == 0 && result == 0) on_reply(i, reply);
    if (rc != 0 && result == 0) result = rc;
  }
  return result;
}

int post(wire::Op op, const Fill& fill) {
  Conn& c = conn();
  std::lock_guard lock(c.mutex);
  if (c.init_result != 0) return kErrNotInitialized;
  if (c.fd < 0) return kErrUnknown;
  wire::Writer w(c.out);
  w.frame(op, 0, ++c.seq);
  fill(w);
  w.finish();
  ++c.posted;
  if (c.out.size() >= kFlushAt && !flush_locked(c)) return kErrUnknown;
  return 0;
}

int upload_image(const void* image, std::size_t size) {
  int rc = call(wire::Op::ImageBegin, [&](wire::Writer& w) { w.u64(size); });
  auto* p = static_cast<const std::uint8_t*>(image);
  for (std::size_t off = 0; rc == 0 && off < size; off += wire::kChunk) {
    std::size_t n = std::min(wire::kChunk, size - off);
    rc = post(wire::Op::ImageChunk, [&](wire::Writer& w) { w.raw(p + off, n); });
  }
  return rc;
}

std::uint64_t current_ctx() { return t_ctx.empty() ? 0 : t_ctx.back(); }
void set_current_ctx(std::uint64_t ctx) {
  if (t_ctx.empty()) t_ctx.push_back(ctx);
  else t_ctx.back() = ctx;
}
void push_ctx(std::uint64_t ctx) { t_ctx.push_back(ctx); }
std::uint64_t pop_ctx() {
  if (t_ctx.empty()) return 0;
  auto c = t_ctx.back();
  t_ctx.pop_back();
  return c;
}

bool strict() {
  static const bool s = [] {
    const char* e = std::getenv("RUNSNACK_CUDA_STRICT");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  return s;
}

bool trace() {
  static const bool t = [] {
    const char* e = std::getenv("RUNSNACK_CUDA_TRACE");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  return t;
}

void warn_once(const char* what, const char* name) {
  static std::mutex m;
  static std::set<std::string>* seen = new std::set<std::string>;
  std::lock_guard lock(m);
  if (!seen->insert(std::string(what) + name).second) return;
  std::fprintf(stderr, "runsnack cuda: %s: %s\n", what, name);
  if (strict()) {
    std::fprintf(stderr, "runsnack cuda: RUNSNACK_CUDA_STRICT=1, aborting\n");
    std::abort();
  }
}

}  // namespace runsnack::cuda::shim
