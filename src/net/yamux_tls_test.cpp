// The TLS Transport after it takes the connection over from asio::ssl::stream,
// alone and under the Mux (self-signed Ed25519 certificate, no verification:
// key pinning belongs to the session layer).
#include "net/yamux_session.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/system_error.hpp>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstdio>
#include <cstring>

namespace runsnack {
namespace {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
using asio::awaitable;
using asio::ip::tcp;
using namespace std::chrono_literals;

ssl::context make_context(bool server) {
  ssl::context ctx(server ? ssl::context::tls_server : ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_3_VERSION);
  if (server) {
    EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_sign(cert, key, nullptr);
    SSL_CTX_use_certificate(ctx.native_handle(), cert);
    SSL_CTX_use_PrivateKey(ctx.native_handle(), key);
    X509_free(cert);
    EVP_PKEY_free(key);
  }
  return ctx;
}


// ------------------------------------------------------------ the Transport alone

// A connected pair of TLS streams, handshake done.
struct TlsPair {
  asio::io_context& io;
  ssl::context server_ctx = make_context(true);
  ssl::context client_ctx = make_context(false);
  std::unique_ptr<ssl::stream<tcp::socket>> client, server;

  explicit TlsPair(asio::io_context& io) : io(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    client = std::make_unique<ssl::stream<tcp::socket>>(io, client_ctx);
    client->lowest_layer().connect(acceptor.local_endpoint());
    server = std::make_unique<ssl::stream<tcp::socket>>(acceptor.accept(), server_ctx);
  }
  awaitable<void> handshake() {
    using namespace asio::experimental::awaitable_operators;
    co_await (client->async_handshake(ssl::stream_base::client, asio::use_awaitable) &&
              server->async_handshake(ssl::stream_base::server, asio::use_awaitable));
  }
};

std::uint8_t pattern(std::size_t i, std::uint8_t seed) {
  return static_cast<std::uint8_t>((i ^ (i >> 9) ^ (i >> 17)) * 31 + seed);
}

// Writes `total` pattern bytes as gather writes of mixed sizes (tiny, sub-record,
// multi-record), optionally asking for a KeyUpdate part-way; then shutdown().
awaitable<void> send_pattern(Transport& t, std::size_t total, std::uint8_t seed, SSL* key_update = nullptr) {
  static constexpr std::size_t kSizes[] = {12, 100 * 1024 + 3, 5, 16 * 1024, 300 * 1024 + 7, 1, 40 * 1024};
  std::vector<std::uint8_t> data(total);
  for (std::size_t i = 0; i < total; ++i) data[i] = pattern(i, seed);
  std::size_t sent = 0, k = 0;
  while (sent < total) {
    std::vector<asio::const_buffer> gather;
    for (int i = 0; i < 5 && sent < total; ++i, ++k) {
      std::size_t n = std::min(kSizes[k % std::size(kSizes)], total - sent);
      gather.emplace_back(data.data() + sent, n);
      sent += n;
    }
    if (key_update != nullptr && sent > total / 2 && sent - total / 2 < 1024 * 1024) {
      EXPECT_EQ(SSL_key_update(key_update, SSL_KEY_UPDATE_REQUESTED), 1);
      key_update = nullptr;
    }
    co_await t.write(gather);
  }
  co_await t.shutdown(PeerWait::up_to_a_second);
}

struct Received {
  std::size_t bytes = 0;
  bool exact = true;
  boost::system::error_code end;  // why reading stopped
};

awaitable<void> receive_pattern(Transport& t, std::uint8_t seed, Received& r) {
  std::vector<std::uint8_t> buf(200 * 1024);
  try {
    for (;;) {
      std::size_t n = co_await t.read_some(asio::buffer(buf));
      EXPECT_GT(n, 0u);
      for (std::size_t i = 0; i < n; ++i) r.exact &= buf[i] == pattern(r.bytes + i, seed);
      r.bytes += n;
    }
  } catch (const boost::system::system_error& e) {
    r.end = e.code();
  }
}

// Both directions at once after the handover, byte-exact, ended by close_notify.
void exchange(bool key_updates) {
  asio::io_context io;
  TlsPair pair(io);
  constexpr std::size_t kClientBytes = 48 * 1024 * 1024 + 11;
  constexpr std::size_t kServerBytes = 20 * 1024 * 1024 + 5;
  Received at_server, at_client;
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    co_await pair.handshake();
    SSL* client_ssl = pair.client->native_handle();
    SSL* server_ssl = pair.server->native_handle();
    auto client = make_tls_transport(std::move(pair.client));
    auto server = make_tls_transport(std::move(pair.server));
    co_await ((send_pattern(*client, kClientBytes, 1, key_updates ? client_ssl : nullptr) &&
               receive_pattern(*client, 2, at_client)) &&
              (send_pattern(*server, kServerBytes, 2, key_updates ? server_ssl : nullptr) &&
               receive_pattern(*server, 1, at_server)));
    client->close();
    server->close();
    done = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(60s);
  ASSERT_TRUE(done);
  EXPECT_EQ(at_server.bytes, kClientBytes);
  EXPECT_EQ(at_client.bytes, kServerBytes);
  EXPECT_TRUE(at_server.exact);
  EXPECT_TRUE(at_client.exact);
  EXPECT_EQ(at_server.end, asio::error::eof) << at_server.end.message();
  EXPECT_EQ(at_client.end, asio::error::eof) << at_client.end.message();
}

TEST(TlsTransport, BothWaysAfterHandoverEndWithCloseNotify) { exchange(false); }

TEST(TlsTransport, KeyUpdatesMidStream) { exchange(true); }

// Records the peer sent before the handover, already read from the socket by
// asio (past the message asio was asked for), are not lost.
TEST(TlsTransport, KeepsBytesReadPastTheHandshake) {
  asio::io_context io;
  TlsPair pair(io);
  Received at_client;
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    co_await pair.handshake();
    std::vector<std::uint8_t> data(64 * 1024);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern(i, 3);
    // Two writes, two records: asio reads both in one recv, decrypts the first.
    co_await asio::async_write(*pair.server, asio::buffer(data.data(), 10), asio::use_awaitable);
    co_await asio::async_write(*pair.server, asio::buffer(data.data() + 10, 1000), asio::use_awaitable);
    std::uint8_t first[10];
    co_await asio::async_read(*pair.client, asio::buffer(first), asio::use_awaitable);
    EXPECT_EQ(std::memcmp(first, data.data(), sizeof first), 0);
    EXPECT_GT(BIO_ctrl_pending(SSL_get_rbio(pair.client->native_handle())), 0u);  // what this test is about

    auto client = make_tls_transport(std::move(pair.client));
    auto server = make_tls_transport(std::move(pair.server));
    std::vector<asio::const_buffer> rest{asio::buffer(data.data() + 1010, data.size() - 1010)};
    co_await server->write(rest);
    server->close();  // no close_notify: the client's read ends with a truncation error
    at_client.bytes = 10;
    co_await receive_pattern(*client, 3, at_client);
    client->close();
    done = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(30s);
  ASSERT_TRUE(done);
  EXPECT_EQ(at_client.bytes, 64u * 1024);
  EXPECT_TRUE(at_client.exact);
  EXPECT_EQ(at_client.end, asio::ssl::error::stream_truncated) << at_client.end.message();
}

// A bulk write to a peer that does not read blocks; close() ends it with an
// error, as the Mux's write watchdog does.
TEST(TlsTransport, CloseEndsABulkWriteToAPeerThatDoesNotRead) {
  asio::io_context io;
  TlsPair pair(io);
  std::unique_ptr<Transport> client, server;
  std::size_t written = 0;
  bool failed = false, closed = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    co_await pair.handshake();
    client = make_tls_transport(std::move(pair.client));
    server = make_tls_transport(std::move(pair.server));  // never reads
    std::vector<std::uint8_t> chunk(1024 * 1024, 7);
    std::vector<asio::const_buffer> gather{asio::buffer(chunk)};
    try {
      for (;;) {
        co_await client->write(gather);
        written += chunk.size();
      }
    } catch (const boost::system::system_error&) {
      failed = true;
    }
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  asio::co_spawn(io, [&]() -> awaitable<void> {
    // Long enough for the socket buffers to fill; the outcome does not depend on it.
    asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
    co_await t.async_wait(asio::use_awaitable);
    client->close();
    closed = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(30s);
  EXPECT_TRUE(closed);
  EXPECT_TRUE(failed);
  EXPECT_GT(written, 0u);
  server->close();
}

// trim() between bulk transfers (while the receiver's read waits for data)
// and after them loses and reorders nothing.
TEST(TlsTransport, TrimKeepsTheStreamExact) {
  asio::io_context io;
  TlsPair pair(io);
  constexpr std::size_t kPart = 6 * 1024 * 1024 + 5;
  Received at_server;
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    co_await pair.handshake();
    auto client = make_tls_transport(std::move(pair.client));
    auto server = make_tls_transport(std::move(pair.server));
    auto sender = [&]() -> awaitable<void> {
      std::vector<std::uint8_t> data(2 * kPart);
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = pattern(i, 5);
      std::vector<asio::const_buffer> first{asio::buffer(data.data(), kPart)};
      co_await client->write(first);
      while (at_server.bytes < kPart) {  // all of it read: the server's read now waits for more
        asio::steady_timer t(co_await asio::this_coro::executor, 2ms);
        co_await t.async_wait(asio::use_awaitable);
      }
      client->trim();
      server->trim();
      std::vector<asio::const_buffer> second{asio::buffer(data.data() + kPart, kPart)};
      co_await client->write(second);
      client->trim();
      co_await client->shutdown(PeerWait::up_to_a_second);
    };
    co_await (sender() && receive_pattern(*server, 5, at_server));
    client->close();
    server->close();
    done = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(60s);
  ASSERT_TRUE(done);
  EXPECT_EQ(at_server.bytes, 2 * kPart);
  EXPECT_TRUE(at_server.exact);
  EXPECT_EQ(at_server.end, asio::error::eof) << at_server.end.message();
}

// ------------------------------------------------------------ the Mux over TLS

// Over TLS the peer's end is its close_notify: the session is over, not lost(). A TCP end without
// it (a peer whose keepalive gave up and closed, or a killed one) is lost(): a consumer reconnects
// from that (cli/cmd_run.cpp).
TEST(YamuxTls, AnEndWithoutCloseNotifyIsLost) {
  for (bool close_notify : {true, false}) {
    asio::io_context io;
    TlsPair pair(io);
    bool done = false;
    asio::co_spawn(io, [&]() -> awaitable<void> {
      co_await pair.handshake();
      auto client = Mux::create(make_tls_transport(std::move(pair.client)), yamux::Role::client);
      auto peer = make_tls_transport(std::move(pair.server));  // a bare TLS peer
      bool ended = false;
      asio::co_spawn(io, client->run(), [&](std::exception_ptr) { ended = true; });
      std::uint8_t ping[12];  // the Mux's first ping: read, so that the close below is a FIN, not a reset
      for (std::size_t got = 0; got < sizeof ping;)
        got += co_await peer->read_some(asio::buffer(ping + got, sizeof ping - got));
      if (close_notify) co_await peer->shutdown(PeerWait::none);
      else peer->close();
      while (!ended) {
        asio::steady_timer t(io, 1ms);
        co_await t.async_wait(asio::use_awaitable);
      }
      EXPECT_EQ(client->lost(), !close_notify)
          << "close_notify " << close_notify << ": " << (client->close_reason() ? client->close_reason()->what() : "");
      peer->close();
      done = true;
    }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    io.run_for(10s);
    EXPECT_TRUE(done);
  }
}

TEST(YamuxTls, StreamsOverTls) {
  asio::io_context io;
  auto server_ctx = make_context(true);
  auto client_ctx = make_context(false);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  auto client_tls = std::make_unique<ssl::stream<tcp::socket>>(io, client_ctx);
  client_tls->lowest_layer().connect(acceptor.local_endpoint());
  auto server_tls = std::make_unique<ssl::stream<tcp::socket>>(acceptor.accept(), server_ctx);
  bool done = false;
  asio::co_spawn(io, [&]() -> awaitable<void> {
    using namespace asio::experimental::awaitable_operators;
    co_await (client_tls->async_handshake(ssl::stream_base::client, asio::use_awaitable) &&
              server_tls->async_handshake(ssl::stream_base::server, asio::use_awaitable));
    auto client = Mux::create(make_tls_transport(std::move(client_tls)), yamux::Role::client);
    auto server = Mux::create(make_tls_transport(std::move(server_tls)), yamux::Role::server);
    auto ex = co_await asio::this_coro::executor;
    int ended = 0;
    asio::co_spawn(ex, client->run(), [&](std::exception_ptr) { ++ended; });
    asio::co_spawn(ex, server->run(), [&](std::exception_ptr) { ++ended; });

    constexpr std::size_t kTotal = 64 * 1024 * 1024;
    auto c = co_await client->open_stream();
    std::vector<std::uint8_t> chunk(1024 * 1024);
    for (std::size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<std::uint8_t>(i * 7);
    bool written = false;
    asio::co_spawn(ex, [&]() -> awaitable<void> {
      for (std::size_t sent = 0; sent < kTotal; sent += chunk.size())
        EXPECT_TRUE(co_await (*c)->write(asio::buffer(chunk)));
      EXPECT_TRUE(co_await (*c)->close_write());
      written = true;
    }, [](std::exception_ptr) {});
    auto s = co_await server->accept_stream();
    EXPECT_TRUE(s);
    auto start = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> buf(chunk.size());
    std::size_t got = 0;
    bool exact = true;
    for (;;) {
      auto n = co_await (*s)->read_some(asio::buffer(buf));
      if (!n || *n == 0) break;
      for (std::size_t i = 0; i < *n; ++i) exact &= buf[i] == chunk[(got + i) % chunk.size()];
      got += *n;
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(got, kTotal);
    EXPECT_TRUE(exact);
    std::printf("yamux one stream over loopback TLS: %.1f Gbit/s\n", got * 8 / secs / 1e9);
    while (!written) {
      asio::steady_timer t(ex, 1ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    client->close();
    while (ended < 2) {
      asio::steady_timer t(ex, 5ms);
      co_await t.async_wait(asio::use_awaitable);
    }
    done = true;
  }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
  io.run_for(60s);
  EXPECT_TRUE(done);
}

}  // namespace
}  // namespace runsnack
