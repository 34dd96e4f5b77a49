// StdinWindow stepped alone, and StdinRelay between a real pipe and a CommandLink over a Mux
// pair on loopback TCP: what the command reads, the windows granted, and the early ends.
#include "services/exec/stdin_relay.hpp"

#include "net/transport.hpp"
#include "net/yamux_session.hpp"
#include "fs/frame.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <functional>

namespace runsnack::exec {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

TEST(StdinWindow, GrantsBackWhatWasWrittenInSteps) {
  StdinWindow w;
  EXPECT_EQ(w.open(), StdinWindow::kWindowBytes);
  EXPECT_TRUE(w.received(200 * 1024));
  EXPECT_TRUE(w.received(56 * 1024));
  EXPECT_FALSE(w.received(1)) << "past the window";
  EXPECT_EQ(w.written(10 * 1024), 0u) << "a grant waits for kGrantBytes while more waits";
  EXPECT_EQ(w.written(54 * 1024), 64u * 1024);
  EXPECT_TRUE(w.received(64 * 1024));  // exactly what was granted back
  EXPECT_FALSE(w.received(1));
  EXPECT_EQ(w.waiting(), 256u * 1024);
  EXPECT_EQ(w.written(256 * 1024), 256u * 1024);
  EXPECT_TRUE(w.received(3));
  EXPECT_EQ(w.written(3), 3u) << "all written: what was freed goes back at once";
  EXPECT_EQ(w.waiting(), 0u);
  EXPECT_EQ(w.received_total(), 320u * 1024 + 3);
}

PeerId peer(std::uint8_t b) {
  std::array<std::uint8_t, 32> raw{};
  raw.fill(b);
  return PeerId::from_raw_public_key(raw);
}

void run_test(asio::io_context& io, std::function<awaitable<void>()> body) {
  std::signal(SIGPIPE, SIG_IGN);  // as the provider's main() does: a closed pipe is EPIPE
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> { co_await body(); done = true; io.stop(); },
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(20s);
  EXPECT_TRUE(done) << "test body did not finish in time";
}

// A consumer's stream and the provider's CommandLink on its other end, and a pipe as the command's stdin.
struct RelayRig {
  std::shared_ptr<Mux> consumer, provider;
  std::shared_ptr<MuxStream> c;
  std::shared_ptr<CommandLink> link;
  std::shared_ptr<StdinRelay> relay;
  std::optional<asio::posix::stream_descriptor> command_stdin;  // the read end

  explicit RelayRig(asio::io_context& io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    tcp::socket a(io);
    a.connect(acceptor.local_endpoint());
    tcp::socket b = acceptor.accept();
    consumer = Mux::create(make_tcp_transport(std::move(a)), yamux::Role::client);
    provider = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server);
    asio::co_spawn(io, consumer->run(), asio::detached);
    asio::co_spawn(io, provider->run(), asio::detached);
  }
  awaitable<void> start() {
    auto ex = co_await asio::this_coro::executor;
    auto opened = co_await consumer->open_stream();
    EXPECT_TRUE(opened);
    c = *opened;
    (void)co_await c->write(asio::buffer("x", 1));  // the provider sees a stream once it carries bytes
    auto p = co_await provider->accept_stream();
    EXPECT_TRUE(p);
    std::uint8_t x = 0;
    (void)co_await (*p)->read_exact(asio::buffer(&x, 1));
    link = CommandLink::create(*p, peer(1));
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    command_stdin.emplace(ex, fds[0]);
    relay = StdinRelay::create(ex, fs::UniqueFd(fds[1]));
    asio::co_spawn(ex, relay->run(link), asio::detached);
  }
  // What the command reads until its end of input.
  awaitable<std::string> read_to_end() {
    std::string got;
    std::array<char, 65536> buf{};
    for (;;) {
      auto [ec, n] = co_await command_stdin->async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      got.append(buf.data(), n);
      if (ec) co_return got;
    }
  }
};

awaitable<nlohmann::json> next_control(MuxStream& s) {
  auto j = co_await fs::read_control(s);
  EXPECT_TRUE(j);
  co_return j ? *j : nlohmann::json::object();
}

TEST(StdinRelay, TheCommandReadsWhatCameThenItsEnd) {
  asio::io_context io;
  RelayRig s(io);
  run_test(io, [&]() -> awaitable<void> {
    co_await s.start();
    const nlohmann::json first = co_await next_control(*s.c);
    EXPECT_EQ(first.value("type", ""), "stdin_window");
    EXPECT_EQ(first.value("bytes", 0u), StdinWindow::kWindowBytes);
    std::string sent;
    for (char c : {'a', 'b', 'c'}) {
      std::vector<std::uint8_t> chunk(80 * 1024, static_cast<std::uint8_t>(c));  // more than the pipe holds
      sent.append(chunk.begin(), chunk.end());
      s.relay->take(std::move(chunk));
    }
    s.relay->end();
    const std::string got = co_await s.read_to_end();
    EXPECT_EQ(got.size(), sent.size());
    EXPECT_TRUE(got == sent);
  });
}

TEST(StdinRelay, InputPastTheWindowClosesStdinAndSaysSo) {
  asio::io_context io;
  RelayRig s(io);
  run_test(io, [&]() -> awaitable<void> {
    co_await s.start();
    (void)co_await next_control(*s.c);
    s.relay->take(std::vector<std::uint8_t>(StdinWindow::kWindowBytes + 1, 'x'));
    const std::string got = co_await s.read_to_end();
    EXPECT_EQ(got, "");
    const nlohmann::json closed = co_await next_control(*s.c);
    EXPECT_EQ(closed.value("type", ""), "stdin_closed");
    EXPECT_EQ(closed.value("why", ""), "refused");
  });
}

TEST(StdinRelay, ACommandThatClosedItsStdinStopsTheInput) {
  asio::io_context io;
  RelayRig s(io);
  run_test(io, [&]() -> awaitable<void> {
    co_await s.start();
    (void)co_await next_control(*s.c);
    s.command_stdin->close();  // nothing reads it any more: EPIPE, never SIGPIPE here
    s.relay->take(std::vector<std::uint8_t>(100, 'x'));
    const nlohmann::json closed = co_await next_control(*s.c);
    EXPECT_EQ(closed.value("type", ""), "stdin_closed");
    EXPECT_EQ(closed.value("why", ""), "closed");
    EXPECT_EQ(closed.value("received", 0u), 100u);
  });
}

}  // namespace
}  // namespace runsnack::exec
