#include "cuda/server/host_backend.hpp"
#include "cuda/server/serve.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace runsnack::cuda {
namespace {

using wire::Op;

// A minimal client speaking the wire format to serve_cuda over a socketpair.
class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv_), 0);
    server_ = std::thread([this] { served_ = serve_cuda(sv_[1], backend_); });
  }
  void TearDown() override { finish(); }
  int finish() {
    if (server_.joinable()) {
      ::shutdown(sv_[0], SHUT_WR);
      server_.join();
      ::close(sv_[0]);
      ::close(sv_[1]);
    }
    return served_;
  }
  void send(const std::vector<std::uint8_t>& buf) {
    ASSERT_EQ(::write(sv_[0], buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
  }
  // Sends one request; for a synchronous one returns [result][fields].
  std::vector<std::uint8_t> call(Op op, bool sync, const std::function<void(wire::Writer&)>& fields) {
    std::vector<std::uint8_t> buf;
    wire::Writer w(buf);
    w.frame(op, sync ? wire::kFlagReply : 0, ++seq_);
    fields(w);
    w.finish();
    send(buf);
    if (!sync) return {};
    std::uint8_t head[wire::kHeaderSize];
    EXPECT_EQ(::read(sv_[0], head, sizeof head), static_cast<ssize_t>(sizeof head));
    wire::Header h;
    EXPECT_EQ(wire::decode_header(head, h), "");
    EXPECT_EQ(h.op, Op::Reply);
    EXPECT_EQ(h.seq, seq_);
    std::vector<std::uint8_t> payload(h.length);
    std::size_t got = 0;
    while (got < h.length) got += static_cast<std::size_t>(::read(sv_[0], payload.data() + got, h.length - got));
    return payload;
  }
  static int result(const std::vector<std::uint8_t>& reply) {
    int rc = -1;
    if (reply.size() >= 4) std::memcpy(&rc, reply.data(), 4);
    return rc;
  }
  std::uint64_t primary() {
    auto r = call(Op::PrimaryCtxRetain, true, [](wire::Writer& w) { w.i32(0); });
    EXPECT_EQ(result(r), 0);
    wire::Reader rd(r.data() + 4, r.size() - 4);
    return rd.u64();
  }

  int sv_[2]{};
  HostBackend backend_;
  std::thread server_;
  int served_ = -1;
  std::uint32_t seq_ = 0;
};

TEST_F(ServeTest, HelloDescribesTheDevice) {
  auto r = call(Op::Hello, true, [](wire::Writer& w) { w.u32(wire::kProtocolVersion); });
  ASSERT_EQ(result(r), 0);
  wire::Reader rd(r.data() + 4, r.size() - 4);
  EXPECT_EQ(rd.u32(), wire::kProtocolVersion);
  EXPECT_EQ(rd.i32(), 13000);
  ASSERT_EQ(rd.u32(), 1u);
  auto d = wire::read_device(rd);
  EXPECT_EQ(d.name, HostBackend::kDeviceName);
  EXPECT_EQ(d.attributes.at(75), 9);
  EXPECT_TRUE(rd.at_end());
}

TEST_F(ServeTest, MemoryRoundTripMemsetAndLatchedError) {
  auto ctx = primary();
  auto r = call(Op::MemAlloc, true, [&](wire::Writer& w) { w.u64(ctx), w.u64(64); });
  ASSERT_EQ(result(r), 0);
  std::uint64_t p;
  std::memcpy(&p, r.data() + 4, 8);
  std::vector<std::uint8_t> data(64);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i);
  call(Op::MemcpyHtoD, false, [&](wire::Writer& w) { w.u64(ctx), w.u64(p), w.u64(0), w.raw(data.data(), 64); });
  call(Op::Memset, false, [&](wire::Writer& w) {
    w.u64(ctx), w.u64(p + 8), w.u32(0xabcd), w.u32(2), w.u64(4), w.u64(0);
  });
  r = call(Op::MemcpyDtoH, true, [&](wire::Writer& w) { w.u64(ctx), w.u64(p), w.u64(64), w.u64(0); });
  ASSERT_EQ(result(r), 0);
  ASSERT_EQ(r.size(), 4u + 64u);
  for (std::size_t i = 0; i < 64; ++i) {
    std::uint8_t want = i >= 8 && i < 16 ? (i % 2 == 0 ? 0xcd : 0xab) : static_cast<std::uint8_t>(i);
    EXPECT_EQ(r[4 + i], want) << i;
  }
  // A copy past the end of the allocation fails; the error surfaces at the next synchronous call.
  call(Op::MemcpyHtoD, false, [&](wire::Writer& w) { w.u64(ctx), w.u64(p + 60), w.u64(0), w.raw(data.data(), 8); });
  EXPECT_EQ(result(call(Op::Sync, true, [](wire::Writer&) {})), kErrInvalidValue);
  EXPECT_EQ(result(call(Op::Sync, true, [](wire::Writer&) {})), 0);  // reported once
  EXPECT_EQ(finish(), 0);
  auto calls = backend_.calls();
  std::vector<std::string> want = {"primary_ctx_retain", "mem_alloc 64", "memcpy_htod 64", "memset 2x4",
                                   "memcpy_dtoh 64", "mem_free 64", "primary_ctx_release"};
  EXPECT_EQ(calls, want);
}

TEST_F(ServeTest, BadHandlesAreInvalidHandleNotACrash) {
  auto r = call(Op::ModuleGetFunction, true, [](wire::Writer& w) { w.u64(0xdeadbeef), w.str("k"); });
  EXPECT_EQ(result(r), kErrInvalidHandle);
  r = call(Op::EventQuery, true, [](wire::Writer& w) { w.u64(42); });
  EXPECT_EQ(result(r), kErrInvalidHandle);
  r = call(Op::MemAlloc, true, [](wire::Writer& w) { w.u64(77), w.u64(16); });
  EXPECT_EQ(result(r), kErrInvalidContext);
  call(Op::MemFree, false, [](wire::Writer& w) { w.u64(0x1000); });
  EXPECT_EQ(result(call(Op::Sync, true, [](wire::Writer&) {})), kErrInvalidValue);
}

TEST_F(ServeTest, ModuleLaunchIsRecordedAndRefusedAndEverythingIsFreedAtEof) {
  auto ctx = primary();
  std::vector<std::uint8_t> image(3000, 0x5a);
  call(Op::ImageBegin, true, [&](wire::Writer& w) { w.u64(image.size()); });
  call(Op::ImageChunk, false, [&](wire::Writer& w) { w.raw(image.data(), 2000); });
  call(Op::ImageChunk, false, [&](wire::Writer& w) { w.raw(image.data(), 1000); });
  auto r = call(Op::ModuleLoad, true, [&](wire::Writer& w) { w.u64(ctx); });
  ASSERT_EQ(result(r), 0);
  std::uint64_t mod;
  std::memcpy(&mod, r.data() + 4, 8);
  r = call(Op::ModuleGetFunction, true, [&](wire::Writer& w) { w.u64(mod), w.str("vecAdd"); });
  ASSERT_EQ(result(r), 0);
  std::uint64_t fn;
  std::memcpy(&fn, r.data() + 4, 8);
  r = call(Op::StreamCreate, true, [&](wire::Writer& w) { w.u64(ctx), w.u32(1), w.i32(0); });
  ASSERT_EQ(result(r), 0);
  std::uint64_t stream;
  std::memcpy(&stream, r.data() + 4, 8);
  call(Op::Launch, false, [&](wire::Writer& w) {
    w.u64(ctx), w.u64(fn);
    for (int i = 0; i < 6; ++i) w.u32(i < 3 ? 4 : 256);
    w.u32(0), w.u64(stream), w.u64(0x1234);
  });
  EXPECT_EQ(result(call(Op::StreamSynchronize, true, [&](wire::Writer& w) { w.u64(ctx), w.u64(stream); })),
            kErrNotSupported);
  r = call(Op::EventCreate, true, [&](wire::Writer& w) { w.u64(ctx), w.u32(0); });
  ASSERT_EQ(result(r), 0);
  EXPECT_EQ(finish(), 0);
  auto calls = backend_.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "module_load 3000"), calls.end());
  EXPECT_NE(std::find(calls.begin(), calls.end(), "launch vecAdd grid 4 block 256 params 8 3412000000000000"),
            calls.end());
  for (const char* freed : {"event_destroy", "stream_destroy", "module_unload", "primary_ctx_release"}) {
    EXPECT_NE(std::find(calls.begin(), calls.end(), freed), calls.end()) << freed;
  }
}

TEST_F(ServeTest, MalformedAndOversizedFramesEndTheConnectionCleanly) {
  std::vector<std::uint8_t> buf;
  wire::Writer w(buf);
  w.frame(Op::MemAlloc, wire::kFlagReply, 1);
  w.u32(5);  // too short for [u64 ctx][u64 size]
  w.finish();
  send(buf);
  EXPECT_EQ(finish(), 1);
}

TEST(ServeOversized, FrameOverTheLimitIsRefused) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::uint8_t head[wire::kHeaderSize];
  wire::encode_header(wire::Header{static_cast<std::uint32_t>(wire::kMaxPayload + 1), Op::MemcpyHtoD, 0, 1}, head);
  ASSERT_EQ(::write(sv[0], head, sizeof head), static_cast<ssize_t>(sizeof head));
  HostBackend backend;
  EXPECT_EQ(serve_cuda(sv[1], backend), 1);
  ::close(sv[0]);
  ::close(sv[1]);
}

// Stands in for the driver printing device printf output at a sync point.
class PrintingBackend : public HostBackend {
 public:
  int ctx_synchronize() override {
    std::printf("device says hi %d\n", 42);
    return HostBackend::ctx_synchronize();
  }
};

// In a child process, since capture_stdout takes over fd 1.
TEST(ServeStdout, DevicePrintfReachesTheClientBeforeTheReply) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(sv[0]);
    PrintingBackend backend;
    ServeOptions options;
    options.capture_stdout = true;
    ::_exit(serve_cuda(sv[1], backend, options));
  }
  ::close(sv[1]);
  std::vector<std::uint8_t> buf;
  wire::Writer w(buf);
  w.frame(Op::CtxSynchronize, wire::kFlagReply, 1);
  w.u64(0);
  w.finish();
  ASSERT_EQ(::write(sv[0], buf.data(), buf.size()), static_cast<ssize_t>(buf.size()));
  std::vector<Op> ops;
  std::string printed;
  for (;;) {
    std::uint8_t head[wire::kHeaderSize];
    std::size_t got = 0;
    while (got < sizeof head) {
      ssize_t n = ::read(sv[0], head + got, sizeof head - got);
      ASSERT_GT(n, 0);
      got += static_cast<std::size_t>(n);
    }
    wire::Header h;
    ASSERT_EQ(wire::decode_header(head, h), "");
    std::vector<std::uint8_t> payload(h.length);
    got = 0;
    while (got < h.length) got += static_cast<std::size_t>(::read(sv[0], payload.data() + got, h.length - got));
    ops.push_back(h.op);
    if (h.op == Op::Output) printed.append(payload.begin(), payload.end());
    if (h.op == Op::Reply) break;
  }
  EXPECT_EQ(printed, "device says hi 42\n");
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0], Op::Output);
  ::shutdown(sv[0], SHUT_WR);
  int status = -1;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ::close(sv[0]);
}

}  // namespace
}  // namespace runsnack::cuda
