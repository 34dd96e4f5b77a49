// The cuda service over a real Mux on loopback TCP, with this test binary
// as the server: the provider starts `/proc/self/exe cuda-server --fd 3`,
// and main() below turns that into an echo server that exits with 7 at EOF
// (or hangs at EOF, to be killed).
// So the spawn, relay, kill and reap paths run for real without CUDA.
#include "services/cuda/cuda_service.hpp"
#include "services/common/pump.hpp"

#include "net/transport.hpp"
#include "net/yamux_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace runsnack::cuda {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

constexpr int kFakeServerExit = 7;

std::vector<std::uint8_t> pattern(std::size_t n) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = 2463534242u;
  for (auto& b : v) x ^= x << 13, x ^= x >> 17, x ^= x << 5, b = static_cast<std::uint8_t>(x);
  return v;
}

struct Record {
  std::string kind, decision, reason;
  nlohmann::json detail;
};

struct Fixture {
  asio::io_context io;
  std::shared_ptr<Mux> client, server;
  std::vector<Record> audit;
  std::shared_ptr<SessionLimiter> sessions = std::make_shared<SessionLimiter>();

  Fixture() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    tcp::socket a(io);
    a.connect(acceptor.local_endpoint());
    tcp::socket b = acceptor.accept();
    client = Mux::create(make_tcp_transport(std::move(a)), yamux::Role::client);
    server = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server);
    asio::co_spawn(io, client->run(), asio::detached);
    asio::co_spawn(io, server->run(), asio::detached);
  }

  ServiceContext context() {
    ServiceContext c;
    c.session_id = "s1";
    c.grant.id = "grant00001";
    c.audit = [this](const std::string& k, const std::string& d, const std::string& r, const nlohmann::json& j) {
      audit.push_back({k, d, r, j});
    };
    return c;
  }

  // Accepts the client's streams and serves each with serve_cuda_stream, as the provider's router would.
  awaitable<void> provider(nlohmann::json args) {
    for (;;) {
      auto s = co_await server->accept_stream();
      if (!s) co_return;
      asio::co_spawn(io, serve_cuda_stream(sessions, *s, args, context()), asio::detached);
    }
  }

  const Record* find(const std::string& kind) const {
    for (const auto& r : audit)
      if (r.kind == kind) return &r;
    return nullptr;
  }

  void run(std::function<awaitable<void>()> body) {
    bool done = false;
    asio::co_spawn(io, [&]() -> awaitable<void> { co_await body(); done = true; },
                   [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    const auto limit = std::chrono::steady_clock::now() + 30s;
    while (!done && std::chrono::steady_clock::now() < limit) io.run_for(50ms);
    ASSERT_TRUE(done) << "test body did not finish in time";
  }
};

awaitable<void> sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
}

awaitable<Result<nlohmann::json>> read_reply(MuxStream& s) { co_return co_await read_stream_message(s); }

bool process_gone(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST(CudaService, RelaysBothWaysAndReapsTheServer) {
  Fixture f;
  const auto data = pattern(3 * 1024 * 1024 + 17);  // several relay buffers and windows
  f.run([&]() -> awaitable<void> {
    asio::co_spawn(f.io, f.provider(nlohmann::json::object()), asio::detached);
    auto s = co_await f.client->open_stream();
    EXPECT_TRUE(s);
    if (!s) co_return;
    auto reply = co_await read_reply(**s);
    EXPECT_TRUE(reply && (*reply)["ok"] == true) << (reply ? reply->dump() : reply.error().what());
    if (!reply) co_return;
    const pid_t pid = (*reply)["pid"].get<pid_t>();
    EXPECT_GT(pid, 0);
    auto writer = [&]() -> awaitable<void> {
      EXPECT_TRUE(co_await (*s)->write(asio::buffer(data)));
      EXPECT_TRUE(co_await (*s)->close_write());
    };
    asio::co_spawn(f.io, writer(), asio::detached);
    std::vector<std::uint8_t> got;
    std::vector<std::uint8_t> buf(100000);
    for (;;) {
      auto n = co_await (*s)->read_some(asio::buffer(buf));
      EXPECT_TRUE(n);
      if (!n || *n == 0) break;
      got.insert(got.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
    }
    EXPECT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data);
    for (int i = 0; i < 200 && !f.find("cuda_end"); ++i) co_await sleep(20ms);
    EXPECT_TRUE(process_gone(pid));
  });
  const Record* start = f.find("cuda_start");
  const Record* end = f.find("cuda_end");
  ASSERT_TRUE(start && end);
  EXPECT_EQ(start->decision, "accept");
  EXPECT_EQ(end->detail["exit_status"], kFakeServerExit);
  EXPECT_EQ(end->detail["bytes_to_server"], data.size());
  EXPECT_EQ(end->detail["bytes_from_server"], data.size());
  EXPECT_EQ(end->detail["session"], "s1");
  EXPECT_EQ(f.sessions->sessions(), 0u);
}

TEST(CudaService, LostSessionKillsTheServer) {
  Fixture f;
  pid_t pid = -1;
  f.run([&]() -> awaitable<void> {
    asio::co_spawn(f.io, f.provider(nlohmann::json::object()), asio::detached);
    auto s = co_await f.client->open_stream();
    EXPECT_TRUE(s);
    if (!s) co_return;
    auto reply = co_await read_reply(**s);
    EXPECT_TRUE(reply);
    if (!reply) co_return;
    pid = (*reply)["pid"].get<pid_t>();
    EXPECT_FALSE(process_gone(pid));
    f.client->close();  // the consumer's session ends without a FIN on the stream
    for (int i = 0; i < 250 && !f.find("cuda_end"); ++i) co_await sleep(20ms);
  });
  const Record* end = f.find("cuda_end");
  ASSERT_TRUE(end);
  EXPECT_EQ(end->detail["signal"], SIGKILL);
  EXPECT_NE(end->reason.find("went away"), std::string::npos) << end->reason;
  EXPECT_TRUE(process_gone(pid));
}

TEST(CudaService, ServerThatIgnoresEofIsKilledAfterTheGrace) {
  Fixture f;
  f.run([&]() -> awaitable<void> {
    asio::co_spawn(f.io, f.provider(nlohmann::json::object()), asio::detached);
    auto s = co_await f.client->open_stream();
    EXPECT_TRUE(s);
    if (!s) co_return;
    auto reply = co_await read_reply(**s);
    EXPECT_TRUE(reply);
    EXPECT_TRUE(co_await (*s)->write(asio::buffer("HANG", 4)));
    EXPECT_TRUE(co_await (*s)->close_write());
    char buf[16];
    auto echoed = co_await (*s)->read_exact(asio::buffer(buf, 4));
    EXPECT_TRUE(echoed);
    auto fin = co_await (*s)->read_some(asio::buffer(buf));  // the server's end closes when it is killed
    EXPECT_TRUE(fin && *fin == 0);
    for (int i = 0; i < 500 && !f.find("cuda_end"); ++i) co_await sleep(20ms);
  });
  const Record* end = f.find("cuda_end");
  ASSERT_TRUE(end);
  EXPECT_EQ(end->detail["signal"], SIGKILL);
  EXPECT_EQ(end->reason, "did not exit after its input ended");
}

TEST(CudaService, CheckReportsTheBackendWithoutStartingAServer) {
  ::setenv("RUNSNACK_CUDA_BACKEND", "host", 1);
  Fixture f;
  f.run([&]() -> awaitable<void> {
    asio::co_spawn(f.io, f.provider({{"check", true}}), asio::detached);
    auto s = co_await f.client->open_stream();
    EXPECT_TRUE(s);
    if (!s) co_return;
    auto reply = co_await read_reply(**s);
    EXPECT_TRUE(reply);
    if (!reply) co_return;
    EXPECT_EQ((*reply)["cuda"]["available"], true);
    EXPECT_EQ((*reply)["cuda"]["backend"], "host");
  });
  ::unsetenv("RUNSNACK_CUDA_BACKEND");
  EXPECT_TRUE(f.audit.empty());
}

TEST(CudaService, TheShimIsNeverTakenForADriver) {
  if (::access(RUNSNACK_TEST_SHIM, F_OK) != 0) GTEST_SKIP() << "the shim is not built: " << RUNSNACK_TEST_SHIM;
  ::setenv("RUNSNACK_CUDA_DRIVER", RUNSNACK_TEST_SHIM, 1);
  const nlohmann::json offered = cuda_availability();
  ::unsetenv("RUNSNACK_CUDA_DRIVER");
  EXPECT_EQ(offered["backend"], "driver");
  EXPECT_EQ(offered["note"].get<std::string>().find("cuda-shim"), std::string::npos) << offered.dump();
}

TEST(CudaRelay, BothWaysKeepsHalfClose) {
  Fixture f;
  f.run([&]() -> awaitable<void> {
    int pair[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    asio::local::stream_protocol::socket app(f.io, asio::local::stream_protocol(), pair[0]);
    asio::local::stream_protocol::socket ours(f.io, asio::local::stream_protocol(), pair[1]);
    // The provider side of the stream answers "pong" after the consumer's FIN.
    auto peer = [&]() -> awaitable<void> {
      auto s = co_await f.server->accept_stream();
      EXPECT_TRUE(s);
      if (!s) co_return;
      char buf[16];
      auto n = co_await (*s)->read_exact(asio::buffer(buf, 4));
      EXPECT_TRUE(n);
      auto fin = co_await (*s)->read_some(asio::buffer(buf));
      EXPECT_TRUE(fin && *fin == 0);
      EXPECT_TRUE(co_await (*s)->write(asio::buffer("pong", 4)));
      EXPECT_TRUE(co_await (*s)->close_write());
    };
    asio::co_spawn(f.io, peer(), asio::detached);
    auto s = co_await f.client->open_stream();
    EXPECT_TRUE(s);
    if (!s) co_return;
    auto app_side = [&]() -> awaitable<void> {
      co_await asio::async_write(app, asio::buffer("ping", 4), asio::use_awaitable);
      app.shutdown(asio::socket_base::shutdown_send);
      char buf[4];
      co_await asio::async_read(app, asio::buffer(buf), asio::use_awaitable);
      EXPECT_EQ(std::string_view(buf, 4), "pong");
    };
    asio::co_spawn(f.io, app_side(), asio::detached);
    PumpOptions options;
    options.buffer_bytes = kPumpBytes;
    auto result = co_await pump(ours, **s, options);
    EXPECT_FALSE(result.error) << *result.error;
    EXPECT_EQ(result.socket_to_stream, 4u);
    EXPECT_EQ(result.stream_to_socket, 4u);
  });
}

}  // namespace
}  // namespace runsnack::cuda

namespace {

// The stand-in cuda-server: echoes descriptor 3 until EOF, then exits
// kFakeServerExit; or, when the input began with "HANG", never exits.
int fake_server() {
  std::vector<char> buf(1 << 16);
  bool first = true, hang = false;
  for (;;) {
    ssize_t n = ::read(3, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (first) hang = n >= 4 && std::memcmp(buf.data(), "HANG", 4) == 0;
    first = false;
    for (ssize_t off = 0; off < n;) {
      ssize_t w = ::write(3, buf.data() + off, static_cast<std::size_t>(n - off));
      if (w <= 0) return 1;
      off += w;
    }
  }
  while (hang) ::pause();
  return runsnack::cuda::kFakeServerExit;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string_view(argv[1]) == "cuda-server") return fake_server();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
