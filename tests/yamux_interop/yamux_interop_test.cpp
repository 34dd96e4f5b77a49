// Interop with HashiCorp's yamux (Go, tests/yamux_interop/peer): our Mux as
// client against a Go server and as server for a Go client, over plain TCP.
#include "net/yamux_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

namespace runsnack {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

constexpr std::size_t kPush = 4 << 20;

// Same generator as the Go peer.
std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> out(n);
  std::uint32_t x = seed;
  for (auto& b : out) {
    x = x * 1103515245u + 12345u;
    b = static_cast<std::uint8_t>(x >> 16);
  }
  return out;
}

std::string sha256_hex(const std::vector<std::uint8_t>& v) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(v.data(), v.size(), d);
  std::string hex;
  char b[3];
  for (unsigned char c : d) {
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  return hex;
}

awaitable<void> sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

awaitable<Result<std::vector<std::uint8_t>>> read_all(MuxStream& s) {
  std::vector<std::uint8_t> all, buf(65536);
  for (;;) {
    auto n = co_await s.read_some(asio::buffer(buf));
    if (!n) co_return n.error();
    if (*n == 0) co_return all;
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
  }
}

bool have_peer() { return std::filesystem::exists(YAMUX_PEER_PATH); }

void run_test(asio::io_context& io, std::function<awaitable<void>()> body) {
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> { co_await body(); done = true; },
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(60s);
  EXPECT_TRUE(done) << "test did not finish in time";
}

MuxConfig config() {
  MuxConfig c;
  c.limits.keepalive_interval = 5000ms;
  c.limits.keepalive_timeout = 5000ms;
  return c;
}

TEST(YamuxInterop, OurClientAgainstGoServer) {
  if (!have_peer()) GTEST_SKIP() << "Go yamux peer not built (no `go` at configure time)";
  FILE* peer = popen(YAMUX_PEER_PATH " server", "r");
  ASSERT_NE(peer, nullptr);
  char line[32] = {};
  ASSERT_NE(fgets(line, sizeof line, peer), nullptr);
  int port = std::atoi(line);
  ASSERT_GT(port, 0);

  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::address_v4::loopback(), static_cast<unsigned short>(port)));
  auto mux = Mux::create(make_tcp_transport(std::move(socket)), yamux::Role::client, config());
  bool ended = false;
  asio::co_spawn(io, mux->run(), [&](std::exception_ptr) { ended = true; });

  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    int finished = 0;
    // Echo streams: byte-exact both ways, half-close in both directions.
    auto echo = [&](int i) -> awaitable<void> {
      auto s = co_await mux->open_stream();
      EXPECT_TRUE(s);
      auto data = pattern(200000 + i * 123457, i);
      asio::co_spawn(ex, [&, s = *s]() -> awaitable<void> {
        std::uint8_t cmd = 'E';
        EXPECT_TRUE(co_await s->write(asio::buffer(&cmd, 1)));
        EXPECT_TRUE(co_await s->write(asio::buffer(data)));
        EXPECT_TRUE(co_await s->close_write());
      }, asio::detached);
      auto got = co_await read_all(**s);
      EXPECT_TRUE(got && *got == data) << "echo stream " << i;
      ++finished;
    };
    // Hash streams: the Go side reports the SHA-256 of what it received.
    auto hash = [&](int i) -> awaitable<void> {
      auto s = co_await mux->open_stream();
      auto data = pattern(1000000 + i, 100 + i);
      std::uint8_t cmd = 'S';
      EXPECT_TRUE(co_await (*s)->write(asio::buffer(&cmd, 1)));
      EXPECT_TRUE(co_await (*s)->write(asio::buffer(data)));
      EXPECT_TRUE(co_await (*s)->close_write());
      auto got = co_await read_all(**s);
      EXPECT_TRUE(got && std::string(got->begin(), got->end()) == sha256_hex(data));
      ++finished;
    };
    // Flow control, Go does not read for 1 s: our write must block after the window.
    {
      auto s = co_await mux->open_stream();
      auto data = pattern(kPush, 9);
      bool written = false;
      auto before = mux->bytes_out();
      asio::co_spawn(ex, [&]() -> awaitable<void> {
        std::uint8_t cmd = 'N';
        EXPECT_TRUE(co_await (*s)->write(asio::buffer(&cmd, 1)));
        EXPECT_TRUE(co_await (*s)->write(asio::buffer(data)));
        EXPECT_TRUE(co_await (*s)->close_write());
        written = true;
      }, asio::detached);
      co_await sleep(500ms);
      EXPECT_FALSE(written) << "write finished although the peer was not reading";
      // Only the initial 256 KiB window (plus headers) may have left for it.
      EXPECT_LE(mux->bytes_out() - before, 256u * 1024 + 1024);
      auto got = co_await read_all(**s);
      EXPECT_TRUE(written);
      EXPECT_TRUE(got && std::string(got->begin(), got->end()) == sha256_hex(data));
    }
    for (int i = 0; i < 4; ++i) asio::co_spawn(ex, echo(i), asio::detached);
    for (int i = 0; i < 3; ++i) asio::co_spawn(ex, hash(i), asio::detached);

    while (finished < 7) co_await sleep(5ms);
    // Reverse: we do not read for 500 ms; the Go writer must block after our window.
    {
      auto s = co_await mux->open_stream();
      std::uint8_t cmd[9] = {'G'};
      for (int b = 0; b < 8; ++b) cmd[1 + b] = static_cast<std::uint8_t>(std::uint64_t{kPush} >> (56 - 8 * b));
      auto before = mux->bytes_in();
      EXPECT_TRUE(co_await (*s)->write(asio::buffer(cmd)));
      co_await sleep(500ms);
      EXPECT_LE(mux->bytes_in() - before, 256u * 1024 + 1024);
      EXPECT_GE(mux->bytes_in() - before, 256u * 1024);
      auto got = co_await read_all(**s);
      EXPECT_TRUE(got && *got == pattern(kPush, kPush));
    }
    auto rtt = co_await mux->ping();
    EXPECT_TRUE(rtt);
    mux->close();
    while (!ended) co_await sleep(5ms);
  });
  EXPECT_EQ(pclose(peer), 0);
}

TEST(YamuxInterop, GoClientAgainstOurServer) {
  if (!have_peer()) GTEST_SKIP() << "Go yamux peer not built (no `go` at configure time)";
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  std::string cmd = std::string(YAMUX_PEER_PATH) + " client 127.0.0.1:" +
                    std::to_string(acceptor.local_endpoint().port());
  FILE* peer = popen(cmd.c_str(), "r");
  ASSERT_NE(peer, nullptr);
  auto mux = Mux::create(make_tcp_transport(acceptor.accept()), yamux::Role::server, config());
  bool ended = false;
  asio::co_spawn(io, mux->run(), [&](std::exception_ptr) { ended = true; });

  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    bool push_checked = false;
    int active = 0;  // serve() coroutines still running: they use this frame
    auto serve = [&](std::shared_ptr<MuxStream> s) -> awaitable<void> {
      ++active;
      std::uint8_t c = 0;
      EXPECT_TRUE(co_await s->read_exact(asio::buffer(&c, 1)));
      if (c == 'E') {  // streaming echo until the peer's FIN, then ours
        std::vector<std::uint8_t> buf(50000);
        for (;;) {
          auto n = co_await s->read_some(asio::buffer(buf));
          EXPECT_TRUE(n) << (n ? "" : n.error().what());
          if (!n || *n == 0) break;
          EXPECT_TRUE(co_await s->write(asio::buffer(buf.data(), *n)));
        }
        EXPECT_TRUE(co_await s->close_write());
      } else if (c == 'P') {  // the Go side does not read for 1 s
        auto data = pattern(kPush, kPush);
        bool written = false;
        auto before = mux->bytes_out();
        asio::co_spawn(ex, [&]() -> awaitable<void> {
          EXPECT_TRUE(co_await s->write(asio::buffer(data)));
          EXPECT_TRUE(co_await s->close_write());
          written = true;
        }, asio::detached);
        co_await sleep(500ms);
        EXPECT_FALSE(written);
        // Echo traffic shares the connection; it is at most 6 x 0.7 MB.
        EXPECT_LE(mux->bytes_out() - before, 256u * 1024 + 5u * 1000 * 1000);
        while (!written) co_await sleep(5ms);
        push_checked = true;
      } else {
        ADD_FAILURE() << "unknown command " << int(c);
      }
      --active;
    };
    for (;;) {
      auto s = co_await mux->accept_stream();
      if (!s) break;  // the Go client closed the session
      asio::co_spawn(ex, serve(*s), asio::detached);
    }
    while (active > 0) co_await sleep(5ms);
    EXPECT_TRUE(push_checked);
    while (!ended) co_await sleep(5ms);
  });
  char line[16] = {};
  EXPECT_NE(fgets(line, sizeof line, peer), nullptr);
  EXPECT_EQ(std::string(line), "ok\n");
  EXPECT_EQ(pclose(peer), 0);
}

}  // namespace
}  // namespace runsnack
