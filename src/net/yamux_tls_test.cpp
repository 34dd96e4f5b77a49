// The Mux over the TLS Transport (self-signed Ed25519 certificate, no verification:
// key pinning belongs to the session layer).
#include "net/yamux_session.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstdio>

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
