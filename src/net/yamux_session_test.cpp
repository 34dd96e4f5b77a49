// The Mux over real loopback TCP (and over a transport that goes silent).
#include "net/yamux_session.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <utility>

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

// Both ends know the round-trip time right after the session opens, before any
// keepalive: stream windows are sized from it from the first bytes (issue 23).
TEST(YamuxSession, RoundTripTimeIsKnownAtOnce) {
  asio::io_context io;
  MuxConfig config = test_config();
  config.limits.keepalive_interval = 60s;  // no keepalive ping: only the one at the start
  config.limits.keepalive_timeout = 60s;
  config.write_timeout = 60s;
  Pair p(io, config);
  run_test(io, [&]() -> awaitable<void> {
    for (int i = 0; i < 2000 && (p.client->rtt().count() == 0 || p.server->rtt().count() == 0); ++i)
      co_await sleep(5ms);
    EXPECT_GT(p.client->rtt().count(), 0);
    EXPECT_GT(p.server->rtt().count(), 0);
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
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
  awaitable<void> shutdown(PeerWait) override { co_return; }
  // `on_close` runs when the Mux closes it: the moment after the session has decided to end and
  // before its streams are reset.
  void close() override {
    if (on_close) std::exchange(on_close, nullptr)();
    never_.cancel();
  }
  asio::any_io_executor get_executor() override { return ex_; }
  std::function<void()> on_close;

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
  awaitable<void> shutdown(PeerWait wait) override { return inner_->shutdown(wait); }
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
        // Quiet: ticks without traffic trim both ends (each on its own tick, so wait for both).
        int before = trims, server_before = server_trims;
        for (int i = 0; i < 250 && (trims == before || server_trims == server_before); ++i) co_await sleep(20ms);
        EXPECT_GT(trims, before);
        EXPECT_GT(server_trims, server_before);
      }
    }
    client->close();
    while (!client_done || !server_done) co_await sleep(5ms);
  });
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

awaitable<void> write_one_byte(std::shared_ptr<MuxStream> stream, std::optional<Error>* failed) {
  const std::uint8_t byte = 1;
  auto r = co_await stream->write(asio::buffer(&byte, 1));
  *failed = r ? Error(errc::io_error, "the write succeeded") : r.error();
}

// A write that comes while the session ends of a silent peer (after its keepalive gave up, before
// the streams are reset) fails with the session's reason, a timeout, as one a moment later does:
// a detached `run` tells a path that went silent (the consumer may re-attach) from a session
// that was closed by that reason alone (services/exec/detached_commands.cpp).
TEST(YamuxSession, AWriteWhileTheSessionEndsFailsWithItsReason) {
  asio::io_context io;
  MuxConfig config;
  config.limits.keepalive_interval = 100ms;
  config.limits.keepalive_timeout = 100ms;
  auto transport = std::make_unique<SilentTransport>(io.get_executor());
  auto* hook = transport.get();
  auto mux = Mux::create(std::move(transport), yamux::Role::client, config);
  std::optional<Error> failed;
  run_test(io, [&]() -> awaitable<void> {
    auto s = co_await mux->open_stream();
    EXPECT_TRUE(s);
    if (!s) co_return;
    std::shared_ptr<MuxStream> stream = *s;
    // Posted before the transport's read is cancelled, so it runs while the session is closing.
    hook->on_close = [&io, stream, &failed] { asio::co_spawn(io, write_one_byte(stream, &failed), asio::detached); };
    co_await mux->run();
    while (!failed) co_await sleep(1ms);
    EXPECT_TRUE(failed->is(errc::timeout)) << failed->what();
  }, 5s);
}

// Reads what arrives on `s` until its end (EOF or an error): true once it ended.
awaitable<bool> read_to_end(tcp::socket& s) {
  std::uint8_t buf[4096];
  for (;;) {
    auto [ec, n] = co_await s.async_read_some(asio::buffer(buf), asio::as_tuple(asio::use_awaitable));
    if (ec) co_return true;
  }
}

// Whether the connection `s` ends (EOF or reset) within `within`.
awaitable<bool> ends_within(tcp::socket& s, std::chrono::milliseconds within) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, within);
  auto first = co_await (read_to_end(s) || timer.async_wait(asio::as_tuple(asio::use_awaitable)));
  co_return first.index() == 0;
}

// lost(): the session ended without the peer saying so, a fault a consumer recovers from by
// reconnecting (cli/cmd_run.cpp). An end the peer said (its GoAway) is not one, even when the
// connection then breaks.
TEST(YamuxSession, LostOnlyWhenThePeerDidNotEndTheSession) {
  {  // close(): GoAway, then the end of the connection, on both sides.
    asio::io_context io;
    Pair p(io);
    run_test(io, [&]() -> awaitable<void> {
      p.client->close();
      while (!p.client_done || !p.server_done) co_await sleep(5ms);
      EXPECT_FALSE(p.client->lost());
      EXPECT_FALSE(p.server->lost());
    });
  }
  for (bool go_away_first : {false, true}) {  // the connection reset under it
    asio::io_context io;
    auto [peer, b] = socket_pair(io);
    auto mux = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server, test_config());
    run_test(io, [&]() -> awaitable<void> {
      bool ended = false;
      asio::co_spawn(io, mux->run(), [&](std::exception_ptr) { ended = true; });
      if (go_away_first) {
        auto go_away = yamux::encode_header({yamux::FrameType::go_away, 0, 0, 0});
        co_await asio::async_write(peer, asio::buffer(go_away), asio::use_awaitable);
        while (!mux->is_closed()) co_await sleep(1ms);
      }
      peer.set_option(asio::socket_base::linger(true, 0));
      peer.close();  // a reset
      while (!ended) co_await sleep(1ms);
      EXPECT_EQ(mux->lost(), !go_away_first) << (mux->close_reason() ? mux->close_reason()->what() : "");
    });
  }
}

// A session given up for silence is lost; with quiet_when_lost (a consumer's) its connection
// stays open, unused, until the Mux is destroyed, so that the provider does not read a FIN from
// it as the consumer's end before the new session re-attached (services/exec/detached_commands.hpp).
// Without it the connection ends at once.
TEST(YamuxSession, QuietWhenLostLeavesTheConnectionOpenUntilDestroyed) {
  for (bool quiet : {true, false}) {
    asio::io_context io;
    MuxConfig config;
    config.limits.keepalive_interval = 100ms;
    config.limits.keepalive_timeout = 100ms;
    config.quiet_when_lost = quiet;
    auto [peer, b] = socket_pair(io);  // its kernel acknowledges; nobody answers the pings
    auto mux = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::client, config);
    run_test(io, [&]() -> awaitable<void> {
      co_await mux->run();
      EXPECT_TRUE(mux->lost());
      EXPECT_TRUE(mux->close_reason() && mux->close_reason()->is(errc::timeout));
      const bool ended = co_await ends_within(peer, 500ms);  // named: GCC 12 and co_await in a macro
      EXPECT_EQ(ended, !quiet) << "quiet_when_lost " << quiet;
      if (!quiet) co_return;
      mux.reset();  // the connection closes with it
      const bool ended_with_it = co_await ends_within(peer, 2000ms);
      EXPECT_TRUE(ended_with_it);
    }, 5s);
  }
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

TEST(YamuxSession, APingFloodIsCutOffWithGoAway) {
  // 4096 pings in one write, never reading the answers: a GoAway, and the session ends.
  std::vector<yamux::FrameHeader> pings;
  std::vector<std::uint8_t> bytes;
  for (std::uint32_t i = 0; i < 4096; ++i) {
    auto e = yamux::encode_header({yamux::FrameType::ping, yamux::flag::syn, 0, i});
    bytes.insert(bytes.end(), e.begin(), e.end());
  }
  expect_protocol_error(bytes);
}

TEST(YamuxSession, ReadGrowingAllocatesAsBytesArrive) {
  asio::io_context io;
  Pair p(io);
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto c = co_await p.client->open_stream();
    auto data = pattern(3 * 1024 * 1024 + 17, 3);
    EXPECT_TRUE(co_await (*c)->write(asio::buffer(data.data(), 1000)));
    auto s = co_await p.server->accept_stream();
    std::vector<std::uint8_t> got;
    bool done = false;
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      EXPECT_TRUE(co_await (*s)->read_growing(data.size(), got));
      done = true;
    }, asio::detached);
    co_await sleep(100ms);
    // 3 MiB announced, 1000 bytes here: the reader holds one step, not the message.
    EXPECT_FALSE(done);
    EXPECT_LE(got.capacity(), 64u * 1024);
    EXPECT_LE(p.server->message_bytes(), 64u * 1024);
    EXPECT_TRUE(co_await (*c)->write(asio::buffer(data.data() + 1000, data.size() - 1000)));
    while (!done) co_await sleep(1ms);
    EXPECT_TRUE(got == data);
    EXPECT_LE(got.capacity(), 2 * data.size());
    EXPECT_EQ(p.server->message_bytes(), 0u);  // given back
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

TEST(YamuxSession, AMessageThatStopsPartWayFailsAfterTheStallLimit) {
  // The peer announces 1000 bytes, sends 10 and keeps the session alive: the
  // read fails with errc::timeout instead of waiting forever, gives back its
  // budget, and later reads on the stream wait (no spinning on the timer).
  asio::io_context io;
  MuxConfig config = test_config();
  config.message_stall = 300ms;
  Pair p(io, config);
  run_test(io, [&]() -> awaitable<void> {
    auto c = co_await p.client->open_stream();
    auto first = pattern(10, 3);
    EXPECT_TRUE(co_await (*c)->write(asio::buffer(first)));
    auto s = co_await p.server->accept_stream();
    std::vector<std::uint8_t> got;
    auto started = std::chrono::steady_clock::now();
    auto r = co_await (*s)->read_growing(1000, got);
    auto waited = std::chrono::steady_clock::now() - started;
    EXPECT_FALSE(r);
    if (!r) {
      EXPECT_TRUE(r.error().is(errc::timeout)) << r.error().what();
    }
    EXPECT_GE(waited, 300ms);
    EXPECT_EQ(p.server->message_bytes(), 0u);
    EXPECT_FALSE(p.server->is_closed());  // only this read failed

    // Bytes that keep coming, however slowly, are not a stall.
    auto more = pattern(40, 4);
    std::vector<std::uint8_t> second;
    bool done = false;
    asio::co_spawn(co_await asio::this_coro::executor, [&]() -> awaitable<void> {
      auto r2 = co_await (*s)->read_growing(40, second);
      EXPECT_TRUE(r2) << (r2 ? "" : r2.error().what());
      done = true;
    }, asio::detached);
    for (int i = 0; i < 4; ++i) {
      co_await sleep(200ms);
      EXPECT_TRUE(co_await (*c)->write(asio::buffer(more.data() + 10 * i, 10)));
    }
    while (!done) co_await sleep(5ms);
    EXPECT_TRUE(second == more);

    // Outside read_growing a read waits as long as it takes.
    std::array<std::uint8_t, 4> buf{};
    bool read_back = false;
    asio::co_spawn(co_await asio::this_coro::executor, [&]() -> awaitable<void> {
      auto n = co_await (*s)->read_some(asio::buffer(buf));
      EXPECT_TRUE(n && *n > 0);
      read_back = true;
    }, asio::detached);
    co_await sleep(500ms);
    EXPECT_FALSE(read_back);
    EXPECT_TRUE(co_await (*c)->write(asio::buffer(first.data(), 4)));
    while (!read_back) co_await sleep(5ms);
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

TEST(YamuxSession, TheSessionsMessageBudgetRefusesTheExcess) {
  asio::io_context io;
  MuxConfig config = test_config();
  config.message_budget = 1024 * 1024;
  Pair p(io, config);
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    auto block = pattern(200 * 1024, 5);
    int ok = 0, refused = 0, finished = 0;
    // Eight streams, each announcing 1 MiB and sending 200 KiB of it, against a 1 MiB budget.
    std::vector<std::shared_ptr<MuxStream>> clients;
    for (int i = 0; i < 8; ++i) {
      auto c = co_await p.client->open_stream();
      EXPECT_TRUE(co_await (*c)->write(asio::buffer(block)));
      clients.push_back(*c);
      auto s = co_await p.server->accept_stream();
      asio::co_spawn(ex, [&, s = *s]() -> awaitable<void> {
        std::vector<std::uint8_t> got;
        auto r = co_await s->read_growing(1024 * 1024, got);
        if (r) ++ok;
        else if (r.error().is(errc::exhausted)) ++refused;
        ++finished;
      }, asio::detached);
    }
    co_await sleep(200ms);
    EXPECT_GT(refused, 0);
    EXPECT_LE(p.server->message_bytes(), config.message_budget);
    for (auto& c : clients) c->reset();
    while (finished < 8) co_await sleep(1ms);
    EXPECT_EQ(ok, 0);
    EXPECT_EQ(p.server->message_bytes(), 0u);
    p.client->close();
    while (!p.client_done || !p.server_done) co_await sleep(5ms);
  });
}

TEST(YamuxSession, APeerThatDoesNotReadRepliesIsNotReadEither) {
  // Pings within the rate, over a connection whose peer never reads: the Mux
  // stops reading after max_pending_replies unwritten answers, so the peer's
  // writes stall too; then the write timeout ends the session.
  asio::io_context io;
  auto [a, b] = socket_pair(io);
  MuxConfig config = test_config();
  config.write_timeout = 500ms;
  config.max_pending_replies = 64;
  config.limits.ping_burst = 1u << 30;  // the rate limit is another test's
  a.set_option(asio::socket_base::receive_buffer_size(4096));
  auto mux = Mux::create(make_tcp_transport(std::move(b)), yamux::Role::server, config);
  bool ended = false;  // outlives the body: the session may end after it returns
  run_test(io, [&]() -> awaitable<void> {
    auto ex = co_await asio::this_coro::executor;
    asio::co_spawn(ex, mux->run(), [&](std::exception_ptr) { ended = true; });
    std::vector<std::uint8_t> batch;
    for (std::uint32_t i = 0; i < 1024; ++i) {
      auto e = yamux::encode_header({yamux::FrameType::ping, yamux::flag::syn, 0, i});
      batch.insert(batch.end(), e.begin(), e.end());
    }
    std::size_t sent = 0;
    a.non_blocking(true);
    auto until = std::chrono::steady_clock::now() + 20s;  // a loaded machine runs the watchdog late
    while (!ended && std::chrono::steady_clock::now() < until) {
      boost::system::error_code ec;
      sent += a.write_some(asio::buffer(batch), ec);
      co_await sleep(1ms);
    }
    EXPECT_TRUE(ended);
    // What the peer got in was bounded by the stall, not by its will.
    EXPECT_LT(sent, 64u * 1024 * 1024);
    EXPECT_TRUE(mux->close_reason() && mux->close_reason()->is(errc::timeout));
  }, 30s);
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
