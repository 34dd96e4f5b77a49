// The Mux over real loopback TCP (and over a transport that goes silent).
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

#include <chrono>
#include <cstdio>
#include <functional>

namespace runsnack {
namespace {

namespace asio = boost::asio;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

std::vector<std::uint8_t> pattern(std::size_t n, std::uint32_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    b = static_cast<std::uint8_t>(x);
  }
  return v;
}

awaitable<Result<std::vector<std::uint8_t>>> read_all(MuxStream& s) {
  std::vector<std::uint8_t> all;
  std::vector<std::uint8_t> buf(100000);
  for (;;) {
    auto n = co_await s.read_some(asio::buffer(buf));
    if (!n) co_return n.error();
    if (*n == 0) co_return all;
    all.insert(all.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(*n));
  }
}

std::pair<tcp::socket, tcp::socket> socket_pair(asio::io_context& io) {
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket a(io);
  a.connect(acceptor.local_endpoint());
  tcp::socket b = acceptor.accept();
  return {std::move(a), std::move(b)};
}

MuxConfig test_config() {
  MuxConfig c;
  c.limits.keepalive_interval = 2000ms;
  c.limits.keepalive_timeout = 2000ms;
  c.write_timeout = 5000ms;
  return c;
}

// Runs `body` on a one-thread io_context; fails the test if it has not
// finished within `limit`.
void run_test(asio::io_context& io, std::function<awaitable<void>()> body,
              std::chrono::seconds limit = 20s) {
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> { co_await body(); done = true; },
                 [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(limit);
  EXPECT_TRUE(done) << "test body did not finish in time";
}

struct Pair {
  std::shared_ptr<Mux> client, server;
  bool client_done = false, server_done = false;
  Pair(asio::io_context& io, MuxConfig config = test_config()) {
    auto [a, b] = socket_pair(io);
    client = Mux::create(make_tcp_transport(std::move(a)), yamux::Role::client, config);
    server = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server, config);
    asio::co_spawn(io, client->run(), [this](std::exception_ptr e) { EXPECT_FALSE(e); client_done = true; });
    asio::co_spawn(io, server->run(), [this](std::exception_ptr e) { EXPECT_FALSE(e); server_done = true; });
  }
};

awaitable<void> sleep(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

TEST(YamuxSession, ManyStreamsByteExactBothWays) {
  asio::io_context io;
  Pair p(io);
  constexpr int kStreams = 24;
  constexpr std::size_t kBytes = 700 * 1000;  // more than two initial windows
  int finished = 0;
  auto exchange = [&](std::shared_ptr<MuxStream> s, bool client) -> awaitable<void> {
    std::uint32_t id = s->id();
    auto mine = pattern(kBytes + id, client ? id : id + 1000);
    auto theirs = pattern(kBytes + id, client ? id + 1000 : id);
    bool wrote = false;
    auto writer = [&]() -> awaitable<void> {
      EXPECT_TRUE(co_await s->write(asio::buffer(mine)));
      EXPECT_TRUE(co_await s->close_write());
      // Half-closed: no more writes, but reading goes on below.
      EXPECT_FALSE(co_await s->write(asio::buffer(mine.data(), 1)));
      wrote = true;
    };
    asio::co_spawn(co_await asio::this_coro::executor, writer(), [](std::exception_ptr) {});
    auto got = co_await read_all(*s);
    EXPECT_TRUE(got);
    if (got) {
      EXPECT_TRUE(*got == theirs) << "stream " << id << " got " << got->size();
    }
    while (!wrote) co_await sleep(1ms);
    ++finished;
  };
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      for (int i = 0; i < kStreams; ++i) {
        auto s = co_await p.server->accept_stream();
        EXPECT_TRUE(s);
        if (!s) co_return;
        asio::co_spawn(ex, exchange(*s, false), asio::detached);
      }
    }, asio::detached);
    for (int i = 0; i < kStreams; ++i) {
      auto s = co_await p.client->open_stream();
      EXPECT_TRUE(s);
      asio::co_spawn(ex, exchange(*s, true), asio::detached);
    }
    while (finished < 2 * kStreams) co_await sleep(5ms);
    EXPECT_EQ(p.client->stream_count(), 0u);  // both directions FIN'ed: forgotten
    EXPECT_GT(p.client->bytes_out(), kStreams * kBytes);
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
  EXPECT_TRUE(p.server->close_reason());
}

TEST(YamuxSession, ResetReachesThePeer) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto c = co_await p.client->open_stream();
    std::uint8_t hello[5] = {'h', 'e', 'l', 'l', 'o'};
    EXPECT_TRUE(co_await (*c)->write(asio::buffer(hello)));
    auto s = co_await p.server->accept_stream();
    std::uint8_t got[5];
    EXPECT_TRUE(co_await (*s)->read_exact(asio::buffer(got)));
    (*c)->reset();
    auto r = co_await (*s)->read_some(asio::buffer(got));
    EXPECT_FALSE(r);
    EXPECT_TRUE(!r && r.error().is(errc::closed));
    EXPECT_FALSE(co_await (*s)->write(asio::buffer(hello)));
    // The session itself is fine.
    auto rtt = co_await p.client->ping();
    EXPECT_TRUE(rtt);
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

TEST(YamuxSession, WriterBlocksWhenPeerDoesNotRead) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto c = co_await p.client->open_stream();
    auto big = pattern(4 * 1024 * 1024, 7);
    bool written = false;
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      EXPECT_TRUE(co_await (*c)->write(asio::buffer(big)));
      written = true;
    }, asio::detached);
    auto s = co_await p.server->accept_stream();
    co_await sleep(300ms);
    // Not one byte beyond the initial window left the client.
    EXPECT_FALSE(written);
    EXPECT_LE(p.client->bytes_out(), 256 * 1024 + 4096);
    EXPECT_LE(p.server->bytes_in(), 256 * 1024 + 4096);
    // Reading releases it, byte-exact.
    std::vector<std::uint8_t> got(big.size());
    EXPECT_TRUE(co_await (*s)->read_exact(asio::buffer(got)));
    EXPECT_TRUE(got == big);
    while (!written) co_await sleep(1ms);
    p.server->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

awaitable<void> write_pieces_and_close(std::shared_ptr<MuxStream> s, const std::vector<std::uint8_t>* data) {
  // Small and bulk writes mixed: the reader gets copied and adopted chunks.
  std::size_t at = 0, i = 0;
  while (at < data->size()) {
    std::size_t n = std::min(data->size() - at, i++ % 3 == 0 ? std::size_t{700} : std::size_t{300000});
    EXPECT_TRUE(co_await s->write(asio::buffer(data->data() + at, n)));
    at += n;
  }
  EXPECT_TRUE(co_await s->close_write());
}

TEST(YamuxSession, ReadViewLendsBytesInOrderAndWindowWaitsForConsume) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto c = co_await p.client->open_stream();
    auto big = pattern(3 * 1024 * 1024 + 123, 9);
    asio::co_spawn(ex, write_pieces_and_close(*c, &big), asio::detached);
    auto s = co_await p.server->accept_stream();
    // Lent, not consumed: the window stays shut, nothing beyond it arrives.
    auto first = co_await (*s)->read_view(SIZE_MAX);
    EXPECT_TRUE(first && !first->empty());
    co_await sleep(300ms);
    EXPECT_LE(p.server->bytes_in(), 256 * 1024 + 4096);
    std::vector<std::uint8_t> got;
    std::size_t limit = 1;
    for (;;) {
      auto views = co_await (*s)->read_view(limit);
      EXPECT_TRUE(views);
      if (!views || views->empty()) break;
      std::size_t lent = 0;
      for (const auto& v : *views) {
        const auto* b = static_cast<const std::uint8_t*>(v.data());
        got.insert(got.end(), b, b + v.size());
        lent += v.size();
      }
      EXPECT_LE(lent, limit);
      // Take all, or give some back: what is not consumed is lent again.
      std::size_t take = limit % 2 == 0 ? lent : (lent + 1) / 2;
      got.resize(got.size() - (lent - take));
      (*s)->consume(take);
      limit = limit * 3 + 1 > 1024 * 1024 ? 2 : limit * 3 + 1;
    }
    EXPECT_EQ(got.size(), big.size());
    EXPECT_TRUE(got == big);
    p.server->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

TEST(YamuxSession, ReadViewFailsAfterReset) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto c = co_await p.client->open_stream();
    std::uint8_t hello[5] = {'h', 'e', 'l', 'l', 'o'};
    EXPECT_TRUE(co_await (*c)->write(asio::buffer(hello)));
    auto s = co_await p.server->accept_stream();
    auto views = co_await (*s)->read_view(SIZE_MAX);
    EXPECT_TRUE(views && views->size() == 1 && (*views)[0].size() == 5);
    (*s)->consume(5);
    (*c)->reset();
    auto r = co_await (*s)->read_view(SIZE_MAX);
    EXPECT_TRUE(!r && r.error().is(errc::closed));
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

// Accepts writes, never delivers a byte: a peer that went silent.
class SilentTransport final : public Transport {
 public:
  explicit SilentTransport(asio::any_io_executor ex) : ex_(ex), never_(ex) {
    never_.expires_at(std::chrono::steady_clock::time_point::max());
  }
  awaitable<std::size_t> read_some(asio::mutable_buffer) override {
    co_await never_.async_wait(asio::as_tuple(asio::use_awaitable));
    throw boost::system::system_error(asio::error::operation_aborted);
  }
  awaitable<void> write(std::span<const asio::const_buffer>) override { co_return; }
  awaitable<void> shutdown() override { co_return; }
  void close() override { never_.cancel(); }
  asio::any_io_executor get_executor() override { return ex_; }

 private:
  asio::any_io_executor ex_;
  asio::steady_timer never_;
};

// Forwards to a TCP transport and counts trim() calls.
class CountingTransport final : public Transport {
 public:
  CountingTransport(std::unique_ptr<Transport> inner, int& trims) : inner_(std::move(inner)), trims_(trims) {}
  awaitable<std::size_t> read_some(asio::mutable_buffer b) override { return inner_->read_some(b); }
  awaitable<void> write(std::span<const asio::const_buffer> b) override { return inner_->write(b); }
  awaitable<void> shutdown() override { return inner_->shutdown(); }
  void close() override { inner_->close(); }
  void trim() override { ++trims_; }
  asio::any_io_executor get_executor() override { return inner_->get_executor(); }

 private:
  std::unique_ptr<Transport> inner_;
  int& trims_;
};

awaitable<void> write_and_close(std::shared_ptr<MuxStream> s, const std::vector<std::uint8_t>* data) {
  EXPECT_TRUE(co_await s->write(asio::buffer(*data)));
  EXPECT_TRUE(co_await s->close_write());
}

TEST(YamuxSession, TrimsTheTransportWhenQuiet) {
  asio::io_context io;
  MuxConfig config = test_config();
  config.limits.keepalive_interval = 200ms;  // keepalive ticks every 50 ms
  config.limits.keepalive_timeout = 200ms;
  auto [a, b] = socket_pair(io);
  int trims = 0, server_trims = 0;
  auto client = Mux::create(std::make_unique<CountingTransport>(make_tcp_transport(std::move(a)), trims),
                            yamux::Role::client, config);
  auto server = Mux::create(std::make_unique<CountingTransport>(make_tcp_transport(std::move(b)), server_trims),
                            yamux::Role::server, config);
  bool client_done = false, server_done = false;
  asio::co_spawn(io, client->run(), [&](std::exception_ptr) { client_done = true; });
  asio::co_spawn(io, server->run(), [&](std::exception_ptr) { server_done = true; });
  run_test(io, [&]() -> awaitable<void> {
    auto data = pattern(3 * 1000 * 1000, 7);
    for (int round = 0; round < 2; ++round) {
      auto c = co_await client->open_stream();
      EXPECT_TRUE(c);
      asio::co_spawn(io, write_and_close(*c, &data), asio::detached);
      auto s = co_await server->accept_stream();
      EXPECT_TRUE(s);
      auto got = co_await read_all(**s);
      EXPECT_TRUE(got && *got == data);
      if (round == 0) {
        int before = trims;
        for (int i = 0; i < 100 && trims == before; ++i) co_await sleep(20ms);  // quiet: ticks without traffic
        EXPECT_GT(trims, before);
      }
    }
    client->close();
    while (!client_done || !server_done) co_await sleep(5ms);
  });
  EXPECT_GT(server_trims, 0);
}

TEST(YamuxSession, KeepaliveDetectsSilentPeer) {
  asio::io_context io;
  MuxConfig config;
  config.limits.keepalive_interval = 100ms;
  config.limits.keepalive_timeout = 100ms;
  auto mux = Mux::create(std::make_unique<SilentTransport>(io.get_executor()), yamux::Role::client,
                         config);
  run_test(io, [&]() -> awaitable<void> {
    auto s = co_await mux->open_stream();
    EXPECT_TRUE(s);
    auto start = std::chrono::steady_clock::now();
    co_await mux->run();
    auto took = std::chrono::steady_clock::now() - start;
    EXPECT_GE(took, 150ms);
    EXPECT_LT(took, 1000ms);
    EXPECT_TRUE(mux->close_reason() && mux->close_reason()->is(errc::timeout));
    std::uint8_t b[1];
    auto r = co_await (*s)->read_some(asio::buffer(b));
    EXPECT_FALSE(r);
  }, 5s);
}

// A raw TCP peer sends `bytes`; the Mux must answer GoAway(protocol error) and close.
void expect_protocol_error(std::vector<std::uint8_t> bytes) {
  asio::io_context io;
  auto [a, b] = socket_pair(io);
  auto mux = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server, test_config());
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    bool ended = false;
    asio::co_spawn(ex, mux->run(), [&](std::exception_ptr) { ended = true; });
    co_await asio::async_write(a, asio::buffer(bytes), asio::use_awaitable);
    std::vector<std::uint8_t> reply;
    std::uint8_t buf[4096];
    for (;;) {
      auto [ec, n] = co_await a.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
      if (ec) break;
      reply.insert(reply.end(), buf, buf + n);
    }
    while (!ended) co_await sleep(1ms);
    auto goaway = yamux::encode_header({yamux::FrameType::go_away, 0, 0, 1});
    EXPECT_GE(reply.size(), 12u);
    EXPECT_TRUE(reply.size() >= 12 && std::equal(goaway.begin(), goaway.end(), reply.end() - 12));
    EXPECT_TRUE(mux->close_reason() && mux->close_reason()->is(errc::malformed));
  }, 5s);
}

std::vector<std::uint8_t> frames(std::initializer_list<yamux::FrameHeader> hs) {
  std::vector<std::uint8_t> v;
  for (const auto& h : hs) {
    auto e = yamux::encode_header(h);
    v.insert(v.end(), e.begin(), e.end());
  }
  return v;
}

// A provider that ends a session (revoke, expiry) sends GoAway(normal), then
// resets a stream the consumer opened just before it arrived. The reset must
// read as the session's end, not as a stream error: the consumer has no other
// way to tell "revoked" from a service fault while the connection still drains.
TEST(YamuxSession, PeersGoAwayCountsAsTheSessionsEndAtOnce) {
  asio::io_context io;
  auto [a, b] = socket_pair(io);
  auto mux = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::client, test_config());
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, mux->run(), asio::detached);
    auto s = co_await mux->open_stream();
    EXPECT_TRUE(s);
    EXPECT_FALSE(mux->is_closed());
    EXPECT_FALSE(mux->close_reason());
    // The raw peer: GoAway(normal), then RST on stream 1; the connection stays open.
    auto bytes = frames({{yamux::FrameType::go_away, 0, 0, 0},
                         {yamux::FrameType::window_update, yamux::flag::rst, 1, 0}});
    co_await asio::async_write(a, asio::buffer(bytes), asio::use_awaitable);
    std::uint8_t buf[1];
    auto r = co_await (*s)->read_some(asio::buffer(buf));
    EXPECT_FALSE(r);
    EXPECT_TRUE(mux->is_closed());
    EXPECT_TRUE(mux->close_reason() && mux->close_reason()->is(errc::closed));
    auto again = co_await mux->open_stream();
    EXPECT_FALSE(again);
    a.close();
  }, 5s);
}

TEST(YamuxSession, GarbageClosesWithProtocolError) {
  expect_protocol_error({'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1', '.', '1'});
}

TEST(YamuxSession, DataBeyondWindowClosesWithProtocolError) {
  using namespace yamux;
  // 4 GiB announced on a fresh stream: refused before anything is buffered.
  expect_protocol_error(frames({{FrameType::window_update, flag::syn, 1, 0},
                                {FrameType::data, 0, 1, 0xffffffff}}));
}

TEST(YamuxSession, PingOnStreamClosesWithProtocolError) {
  expect_protocol_error(frames({{yamux::FrameType::ping, yamux::flag::syn, 5, 1}}));
}

TEST(YamuxSession, ThroughputOneStream) {
  asio::io_context io;
  Pair p(io);
  constexpr std::size_t kTotal = 256 * 1024 * 1024;
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto c = co_await p.client->open_stream();
    std::vector<std::uint8_t> chunk(1024 * 1024, 0x5a);
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      for (std::size_t sent = 0; sent < kTotal; sent += chunk.size())
        EXPECT_TRUE(co_await (*c)->write(asio::buffer(chunk)));
      EXPECT_TRUE(co_await (*c)->close_write());
    }, asio::detached);
    auto s = co_await p.server->accept_stream();
    auto start = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> buf(1024 * 1024);
    std::size_t got = 0;
    for (;;) {
      auto n = co_await (*s)->read_some(asio::buffer(buf));
      if (!n || *n == 0) break;
      got += *n;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(got, kTotal);
    std::printf("yamux one stream over loopback TCP: %.0f MB/s (%.1f Gbit/s)\n", got / secs / 1e6,
                got * 8 / secs / 1e9);
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  }, 60s);
}

}  // namespace
}  // namespace runsnack
