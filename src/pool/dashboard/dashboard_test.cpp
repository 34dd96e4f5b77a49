// The dashboard server over real loopback sockets, with Beast clients.
#include "pool/dashboard/dashboard.hpp"

#include "core/log_exceptions.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <gtest/gtest.h>

#include <chrono>
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

}  // namespace
}  // namespace runsnack::pool::dashboard
