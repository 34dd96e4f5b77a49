// The dashboard server over real loopback sockets, with Beast clients.
#include "pool/dashboard/dashboard.hpp"

#include "core/log_exceptions.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

namespace runsnack::pool::dashboard {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using asio::ip::tcp;
using json = nlohmann::json;

struct Reply {
  boost::system::error_code ec;
  Response res;
  boost::system::error_code end;  // TLS: how the stream ended after the response
};

// Sends `raw` bytes as they are and reads one response.
asio::awaitable<Reply> send_raw(tcp::endpoint ep, std::string raw) {
  Reply out;
  beast::tcp_stream stream(co_await asio::this_coro::executor);
  stream.expires_after(std::chrono::seconds(10));
  auto [cec] = co_await stream.async_connect(ep, asio::as_tuple(asio::use_awaitable));
  if (cec) {
    out.ec = cec;
    co_return out;
  }
  auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(raw), asio::as_tuple(asio::use_awaitable));
  if (wec) {
    out.ec = wec;
    co_return out;
  }
  beast::flat_buffer buffer;
  auto [rec, rn] = co_await http::async_read(stream, buffer, out.res, asio::as_tuple(asio::use_awaitable));
  out.ec = rec;
  co_return out;
}

std::string get_request(const std::string& target) {
  return "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
}

// Runs `body` against a listening dashboard, then stops it.
template <class Body>
void with_dashboard(DashboardOptions options, SnapshotFn snapshot, Body body) {
  asio::io_context io(1);
  options.endpoint = tcp::endpoint(asio::ip::address_v4::loopback(), 0);
  Dashboard dashboard(io.get_executor(), options, std::move(snapshot));
  ASSERT_TRUE(dashboard.listen());
  asio::co_spawn(io, dashboard.run(), log_exceptions("dashboard"));
  asio::co_spawn(io, body(&dashboard), [&](std::exception_ptr e) {
    dashboard.stop();
    if (e) std::rethrow_exception(e);
  });
  io.run_for(std::chrono::seconds(30));  // a guard against a hang, not a timing assertion
  EXPECT_TRUE(io.stopped()) << "the test body did not finish";
}

json snapshot_fixture() { return {{"devices", json::array({{{"name", "cpu-a"}}})}, {"jobs", json::array()}}; }

asio::awaitable<void> fetch_into(Dashboard* d, std::vector<Reply>* out, std::vector<std::string> raws) {
  for (const auto& raw : raws) out->push_back(co_await send_raw(d->local_endpoint(), raw));
}

TEST(Dashboard, ServesThePageSnapshotAnd404) {
  std::vector<Reply> replies;
  with_dashboard({}, snapshot_fixture, [&](Dashboard* d) {
    return fetch_into(d, &replies, {get_request("/"), get_request("/api/snapshot"), get_request("/nope")});
  });
  ASSERT_EQ(replies.size(), 3u);
  for (const auto& r : replies) ASSERT_FALSE(r.ec) << r.ec.message();
  const auto& page = replies[0].res;
  EXPECT_EQ(page.result(), http::status::ok);
  EXPECT_EQ(page[http::field::content_type], "text/html; charset=utf-8");
  EXPECT_EQ(page["X-Content-Type-Options"], "nosniff");
  EXPECT_NE(page["Content-Security-Policy"].find("script-src 'self'"), std::string::npos);
  EXPECT_FALSE(page[http::field::cache_control].empty());
  EXPECT_NE(page.body().find("<html"), std::string::npos);
  EXPECT_EQ(replies[1].res.result(), http::status::ok);
  EXPECT_EQ(replies[1].res[http::field::content_type], "application/json");
  EXPECT_EQ(json::parse(replies[1].res.body()), snapshot_fixture());
  EXPECT_EQ(replies[2].res.result(), http::status::not_found);
}

TEST(Dashboard, RefusesOversizedAndNonGetRequests) {
  std::vector<Reply> replies;
  DashboardOptions options;
  options.max_request_bytes = 1024;
  std::string huge = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + std::string(4000, 'a') + "\r\n\r\n";
  std::string post = "POST /api/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}";
  std::string del = "DELETE / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  std::string body = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'b');
  std::string foreign = "GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n";
  with_dashboard(options, snapshot_fixture,
                 [&](Dashboard* d) { return fetch_into(d, &replies, {huge, post, del, body, foreign}); });
  ASSERT_EQ(replies.size(), 5u);
  for (const auto& r : replies) ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(replies[0].res.result(), http::status::request_header_fields_too_large);
  EXPECT_EQ(replies[1].res.result(), http::status::method_not_allowed);
  EXPECT_EQ(replies[2].res.result(), http::status::method_not_allowed);
  EXPECT_EQ(replies[3].res.result(), http::status::payload_too_large);
  EXPECT_EQ(replies[4].res.result(), http::status::misdirected_request);
  for (const auto& r : replies) EXPECT_FALSE(r.res.keep_alive());
}

struct WsLog {
  std::vector<json> messages;
  boost::system::error_code end;  // how the stream ended, when the body read to the end
  int handshake_status = 0;
};

asio::awaitable<std::unique_ptr<websocket::stream<beast::tcp_stream>>> ws_connect(tcp::endpoint ep, WsLog* log) {
  auto ws = std::make_unique<websocket::stream<beast::tcp_stream>>(co_await asio::this_coro::executor);
  beast::get_lowest_layer(*ws).expires_after(std::chrono::seconds(10));
  auto [cec] = co_await beast::get_lowest_layer(*ws).async_connect(ep, asio::as_tuple(asio::use_awaitable));
  if (cec) co_return nullptr;
  beast::get_lowest_layer(*ws).expires_never();
  ws->set_option(websocket::stream_base::timeout::suggested(beast::role_type::client));
  websocket::response_type res;
  const std::string host = "127.0.0.1:" + std::to_string(ep.port());
  auto [hec] = co_await ws->async_handshake(res, host, "/ws", asio::as_tuple(asio::use_awaitable));
  log->handshake_status = static_cast<int>(res.result_int());
  if (hec) co_return nullptr;
  co_return ws;
}

asio::awaitable<std::optional<json>> ws_read(websocket::stream<beast::tcp_stream>& ws, WsLog* log) {
  beast::flat_buffer buffer;
  auto [ec, n] = co_await ws.async_read(buffer, asio::as_tuple(asio::use_awaitable));
  if (ec) {
    log->end = ec;
    co_return std::nullopt;
  }
  json message = json::parse(beast::buffers_to_string(buffer.data()));
  log->messages.push_back(message);
  co_return message;
}

// Connects, reads the snapshot, has an event published, reads it and the refreshed snapshot.
asio::awaitable<void> ws_live(Dashboard* d, WsLog* log) {
  auto ws = co_await ws_connect(d->local_endpoint(), log);
  if (!ws) co_return;
  if (!co_await ws_read(*ws, log)) co_return;
  const json event = {{"event", "task_done"}, {"task", "t1"}, {"peer", "p"}};
  d->publish(event);
  if (!co_await ws_read(*ws, log)) co_return;
  co_await ws_read(*ws, log);
  co_await ws->async_close(websocket::close_code::normal, asio::as_tuple(asio::use_awaitable));
}

TEST(Dashboard, WebSocketGetsTheSnapshotThenEventsThenAFreshSnapshot) {
  WsLog log;
  int calls = 0;
  DashboardOptions options;
  options.snapshot_interval = std::chrono::milliseconds(10);
  with_dashboard(options, [&] { return json{{"calls", ++calls}}; }, [&](Dashboard* d) { return ws_live(d, &log); });
  EXPECT_EQ(log.handshake_status, 101);
  ASSERT_EQ(log.messages.size(), 3u);
  EXPECT_EQ(log.messages[0], (json{{"event", "snapshot"}, {"snapshot", {{"calls", 1}}}}));
  EXPECT_EQ(log.messages[1], (json{{"event", "task_done"}, {"task", "t1"}, {"peer", "p"}}));
  EXPECT_EQ(log.messages[2], (json{{"event", "snapshot"}, {"snapshot", {{"calls", 2}}}}));
}

// A page opened mid-render gets the tiles and recent events published before it came.
asio::awaitable<void> ws_late(Dashboard* d, WsLog* log) {
  const json submitted = {{"event", "job_submitted"}, {"job", "j1"}, {"image", {{"width", 8}, {"height", 8}}}};
  const json tile = {{"event", "tile_done"}, {"job", "j1"}, {"x", 0}, {"y", 0}, {"w", 4}, {"h", 4}, {"png", "AAAA"}};
  d->publish(submitted);
  d->publish(tile);
  auto ws = co_await ws_connect(d->local_endpoint(), log);
  if (!ws) co_return;
  for (int i = 0; i < 3; ++i)
    if (!co_await ws_read(*ws, log)) co_return;
}

TEST(Dashboard, ALatePageGetsRecentEventsAndTiles) {
  WsLog log;
  with_dashboard({}, snapshot_fixture, [&](Dashboard* d) { return ws_late(d, &log); });
  ASSERT_EQ(log.messages.size(), 3u);
  EXPECT_EQ(log.messages[0]["event"], "snapshot");
  EXPECT_EQ(log.messages[1]["event"], "job_submitted");
  EXPECT_EQ(log.messages[2]["event"], "tile_done");
  EXPECT_EQ(log.messages[2]["png"], "AAAA");
}

// Events published faster than a page takes them overflow its queue: it is disconnected.
asio::awaitable<void> ws_flooded(Dashboard* d, WsLog* log) {
  auto ws = co_await ws_connect(d->local_endpoint(), log);
  if (!ws) co_return;
  if (!co_await ws_read(*ws, log)) co_return;
  for (int i = 0; i < 10; ++i) d->publish(json{{"event", "task_done"}, {"n", i}});  // no suspension: nothing is sent yet
  while (co_await ws_read(*ws, log)) {
  }
}

TEST(Dashboard, ASlowPageIsDisconnectedAtItsQueueCap) {
  WsLog log;
  DashboardOptions options;
  options.max_queued_messages = 3;
  with_dashboard(options, snapshot_fixture, [&](Dashboard* d) { return ws_flooded(d, &log); });
  ASSERT_TRUE(log.end) << "the stream should have been closed";
  EXPECT_LE(log.messages.size(), 1u + 3u);
  EXPECT_EQ(log.messages[0]["event"], "snapshot");
}

asio::awaitable<void> ws_too_many(Dashboard* d, WsLog* first, WsLog* second) {
  auto ws = co_await ws_connect(d->local_endpoint(), first);
  if (!ws) co_return;
  if (!co_await ws_read(*ws, first)) co_return;
  auto refused = co_await ws_connect(d->local_endpoint(), second);
  EXPECT_FALSE(refused);
}

TEST(Dashboard, LimitsConcurrentPages) {
  WsLog first, second;
  DashboardOptions options;
  options.max_websockets = 1;
  with_dashboard(options, snapshot_fixture, [&](Dashboard* d) { return ws_too_many(d, &first, &second); });
  EXPECT_EQ(first.handshake_status, 101);
  EXPECT_EQ(second.handshake_status, 503);
}

// --- TLS (`pool serve --http-tls`) ---

namespace ssl = asio::ssl;

// A P-256 key and a self-signed certificate for it, as PEM files in a fresh folder.
struct TlsFiles {
  std::filesystem::path dir, cert, key, other_key;
  TlsFiles() {
    dir = std::filesystem::temp_directory_path() / ("runsnack-tls-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    cert = dir / "cert.pem";
    key = dir / "key.pem";
    other_key = dir / "other.pem";
    EVP_PKEY* pkey = EVP_EC_gen("P-256");
    EVP_PKEY* other = EVP_EC_gen("P-256");
    X509* x = X509_new();
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, pkey);
    X509_NAME* name = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("pool.test"), -1, -1, 0);
    X509_set_issuer_name(x, name);
    X509_sign(x, pkey, EVP_sha256());
    auto write = [](const std::filesystem::path& path, auto fn) {
      FILE* f = std::fopen(path.c_str(), "w");
      fn(f);
      std::fclose(f);
    };
    write(cert, [&](FILE* f) { PEM_write_X509(f, x); });
    write(key, [&](FILE* f) { PEM_write_PrivateKey(f, pkey, nullptr, nullptr, 0, nullptr, nullptr); });
    write(other_key, [&](FILE* f) { PEM_write_PrivateKey(f, other, nullptr, nullptr, 0, nullptr, nullptr); });
    X509_free(x);
    EVP_PKEY_free(pkey);
    EVP_PKEY_free(other);
  }
  ~TlsFiles() { std::filesystem::remove_all(dir); }
};

DashboardOptions tls_options(const TlsFiles& files) {
  DashboardOptions options;
  auto context = load_tls_context(files.cert, files.key);
  EXPECT_TRUE(context) << context.error().what();
  if (context) options.tls = *context;
  return options;
}

// A TLS client (the certificate is not checked: it is self-signed) sends `raw` and reads one response.
asio::awaitable<Reply> send_tls(tcp::endpoint ep, std::string raw) {
  Reply out;
  ssl::context client(ssl::context::tls_client);
  client.set_verify_mode(ssl::verify_none);
  beast::ssl_stream<beast::tcp_stream> stream(co_await asio::this_coro::executor, client);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(10));
  auto [cec] = co_await beast::get_lowest_layer(stream).async_connect(ep, asio::as_tuple(asio::use_awaitable));
  if (cec) {
    out.ec = cec;
    co_return out;
  }
  auto [hec] = co_await stream.async_handshake(ssl::stream_base::client, asio::as_tuple(asio::use_awaitable));
  if (hec) {
    out.ec = hec;
    co_return out;
  }
  auto [wec, wn] = co_await asio::async_write(stream, asio::buffer(raw), asio::as_tuple(asio::use_awaitable));
  if (wec) {
    out.ec = wec;
    co_return out;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.skip(false);
  auto [rec, rn] = co_await http::async_read_header(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
  if (!rec && parser.get().result() != http::status::switching_protocols && !parser.is_done()) {
    auto [bec, bn] = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    rec = bec;
  }
  out.ec = rec;
  out.res = parser.release();
  if (!rec && !out.res.keep_alive()) {
    char byte;
    auto [eec, en] = co_await stream.async_read_some(asio::buffer(&byte, 1), asio::as_tuple(asio::use_awaitable));
    out.end = eec;
  }
  co_return out;
}

asio::awaitable<void> fetch_tls(Dashboard* d, std::vector<Reply>* out, std::vector<std::string> raws) {
  for (const auto& raw : raws) out->push_back(co_await send_tls(d->local_endpoint(), raw));
}

std::string upgrade_request(const std::string& host, const std::string& origin) {
  return "GET /ws HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: " + origin + "\r\n\r\n";
}

TEST(DashboardTls, ServesThePageOverTls) {
  TlsFiles files;
  std::vector<Reply> replies;
  std::string url;
  // Over TLS a name that is not loopback is answered (the certificate defeats DNS rebinding).
  const std::string join = "GET /join HTTP/1.1\r\nHost: pool.test\r\nConnection: close\r\n\r\n";
  with_dashboard(tls_options(files), snapshot_fixture, [&](Dashboard* d) {
    url = d->url();
    return fetch_tls(d, &replies, {join, get_request("/api/snapshot")});
  });
  EXPECT_TRUE(url.starts_with("https://127.0.0.1:")) << url;
  ASSERT_EQ(replies.size(), 2u);
  for (const auto& r : replies) ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(replies[0].res.result(), http::status::ok);
  EXPECT_NE(replies[0].res.body().find("join.js"), std::string::npos);
  EXPECT_EQ(json::parse(replies[1].res.body()), snapshot_fixture());
  // A close_notify ends a Connection: close answer (eof), not a cut (stream_truncated).
  EXPECT_EQ(replies[0].end, asio::error::eof) << replies[0].end.message();
}

TEST(DashboardTls, APlainRequestToATlsPortGetsNoPage) {
  TlsFiles files;
  std::vector<Reply> replies;
  with_dashboard(tls_options(files), snapshot_fixture,
                 [&](Dashboard* d) { return fetch_into(d, &replies, {get_request("/")}); });
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_TRUE(replies[0].ec) << "a plain HTTP request was answered on the TLS port";
}

// A client that connects and never finishes the handshake holds its slot only until the request deadline.
asio::awaitable<void> stall_handshake(Dashboard* d, std::chrono::milliseconds* held, std::vector<Reply>* during,
                                      std::vector<Reply>* after) {
  auto ex = co_await asio::this_coro::executor;
  beast::tcp_stream stalled(ex);
  stalled.expires_after(std::chrono::seconds(10));
  auto [cec] = co_await stalled.async_connect(d->local_endpoint(), asio::as_tuple(asio::use_awaitable));
  EXPECT_FALSE(cec);
  // Half a ClientHello's record header: the server waits for the rest.
  const std::string partial("\x16\x03\x01", 3);
  co_await asio::async_write(stalled, asio::buffer(partial), asio::as_tuple(asio::use_awaitable));
  const auto start = std::chrono::steady_clock::now();
  asio::steady_timer settle(ex, std::chrono::milliseconds(50));
  co_await settle.async_wait(asio::as_tuple(asio::use_awaitable));
  // The only slot is taken: a second client is closed at once.
  during->push_back(co_await send_tls(d->local_endpoint(), get_request("/")));
  char byte;
  auto [rec, rn] = co_await stalled.async_read_some(asio::buffer(&byte, 1), asio::as_tuple(asio::use_awaitable));
  EXPECT_TRUE(rec) << "the stalled handshake got an answer";
  *held = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  settle.expires_after(std::chrono::milliseconds(50));  // the server's ticket goes as its coroutine ends
  co_await settle.async_wait(asio::as_tuple(asio::use_awaitable));
  after->push_back(co_await send_tls(d->local_endpoint(), get_request("/")));
}

TEST(DashboardTls, AStalledHandshakeIsClosedByTheRequestDeadline) {
  TlsFiles files;
  DashboardOptions options = tls_options(files);
  options.max_connections = 1;
  options.request_timeout = std::chrono::milliseconds(700);
  std::chrono::milliseconds held{0};
  std::vector<Reply> during, after;
  with_dashboard(options, snapshot_fixture,
                 [&](Dashboard* d) { return stall_handshake(d, &held, &during, &after); });
  ASSERT_EQ(during.size(), 1u);
  EXPECT_TRUE(during[0].ec) << "a second connection was served past the cap of 1";
  EXPECT_GE(held.count(), 500);
  EXPECT_LT(held.count(), 5000);
  ASSERT_EQ(after.size(), 1u);
  ASSERT_FALSE(after[0].ec) << after[0].ec.message();
  EXPECT_EQ(after[0].res.result(), http::status::ok);
}

TEST(DashboardTls, WebSocketOriginIsHttpsOfTheHostOrAnExtraOrigin) {
  TlsFiles files;
  DashboardOptions options = tls_options(files);
  options.extra_origins = {"https://pool.example.org"};
  std::vector<Reply> replies;
  with_dashboard(options, snapshot_fixture, [&](Dashboard* d) {
    return fetch_tls(d, &replies,
                     {upgrade_request("pool.test:8443", "https://pool.test:8443"),
                      upgrade_request("pool.test:8443", "http://pool.test:8443"),
                      upgrade_request("pool.test:8443", "https://evil.example"),
                      upgrade_request("127.0.0.1:8080", "https://pool.example.org")});
  });
  ASSERT_EQ(replies.size(), 4u);
  for (const auto& r : replies) ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_EQ(replies[0].res.result(), http::status::switching_protocols);
  EXPECT_EQ(replies[1].res.result(), http::status::forbidden);
  EXPECT_EQ(replies[2].res.result(), http::status::forbidden);
  EXPECT_EQ(replies[3].res.result(), http::status::switching_protocols);
}

TEST(DashboardTls, ACertificateOrKeyThatIsNotUsableIsNamed) {
  TlsFiles files;
  auto missing = load_tls_context((files.dir / "nope.pem").string(), files.key);
  ASSERT_FALSE(missing);
  EXPECT_NE(std::string(missing.error().what()).find("nope.pem"), std::string::npos) << missing.error().what();
  // A key where the certificate should be.
  auto swapped = load_tls_context(files.key, files.key);
  ASSERT_FALSE(swapped);
  EXPECT_NE(std::string(swapped.error().what()).find("is not a PEM certificate"), std::string::npos)
      << swapped.error().what();
  auto garbage_key = load_tls_context(files.cert, files.cert);
  ASSERT_FALSE(garbage_key);
  EXPECT_NE(std::string(garbage_key.error().what()).find("is not a PEM private key"), std::string::npos)
      << garbage_key.error().what();
  auto mismatch = load_tls_context(files.cert, files.other_key);
  ASSERT_FALSE(mismatch);
  EXPECT_NE(std::string(mismatch.error().what()).find("is not the key of the certificate"), std::string::npos)
      << mismatch.error().what();
  EXPECT_TRUE(load_tls_context(files.cert, files.key));
}

TEST(DashboardTls, OriginsAreNormalizedOrRefused) {
  EXPECT_EQ(*normalize_origin("https://Pool.Example.org/"), "https://pool.example.org");
  EXPECT_EQ(*normalize_origin("https://pool.example.org:8443"), "https://pool.example.org:8443");
  EXPECT_FALSE(normalize_origin("pool.example.org"));
  EXPECT_FALSE(normalize_origin("https://pool.example.org/join"));
  EXPECT_FALSE(normalize_origin("https://"));
}

}  // namespace
}  // namespace runsnack::pool::dashboard
