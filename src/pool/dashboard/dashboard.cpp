#include "pool/dashboard/dashboard.hpp"

#include "core/log_exceptions.hpp"
#include "pool/dashboard/event_replay.hpp"
#include "core/address_key.hpp"
#include "pool/dashboard/http_address.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <spdlog/spdlog.h>

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace runsnack::pool::dashboard {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
using asio::ip::tcp;
using json = nlohmann::json;

namespace {

struct WsClient {
  explicit WsClient(HttpStream stream) : ws(std::move(stream)), wake(ws.get_executor()) {}
  websocket::stream<HttpStream> ws;
  std::vector<Message> initial;  // snapshot and replay: sent first, not counted against the cap
  std::deque<Message> queue;     // live events
  asio::steady_timer wake;       // the writer sleeps on it; cancelled when there is work or on close
  bool closed = false;

  void close() {
    if (closed) return;
    closed = true;
    wake.cancel();
    boost::system::error_code ec;
    beast::get_lowest_layer(ws).socket().close(ec);
  }
};

Message serialize(const json& value) {
  return std::make_shared<const std::string>(value.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

struct Dashboard::State {
  State(asio::any_io_executor ex, DashboardOptions opt, SnapshotFn fn)
      : options(opt),
        snapshot(std::move(fn)),
        replay(opt.replay_events, opt.replay_tile_bytes),
        refresh(ex),
        slots(opt.max_connections_per_address, opt.max_connections) {}

  DashboardOptions options;
  RouteOptions routes;
  SnapshotFn snapshot;
  UpgradeFn worker_socket;
  EventReplay replay;
  asio::steady_timer refresh;
  bool refresh_armed = false;
  bool stopping = false;
  ConnectionSlots slots;
  std::map<std::uint64_t, HttpStream*> http_live;  // by slot: closed by stop(), or when evicted
  std::set<std::shared_ptr<WsClient>> clients;

  std::optional<Message> snapshot_message() {
    try {
      const json snap = snapshot();
      return serialize(json{{"event", "snapshot"}, {"snapshot", snap}});
    } catch (const std::exception& e) {
      spdlog::warn("dashboard: snapshot: {}", e.what());
      return std::nullopt;
    }
  }

  void push(const std::shared_ptr<WsClient>& c, const Message& m) {
    if (c->closed) return;
    if (c->queue.size() >= options.max_queued_messages) {
      spdlog::info("dashboard: a browser fell {} messages behind: disconnected", c->queue.size());
      c->close();
      return;
    }
    c->queue.push_back(m);
    c->wake.cancel();
  }

  void push_all(const Message& m) {
    for (const auto& c : clients) push(c, m);
  }
};

namespace {

using StatePtr = std::shared_ptr<Dashboard::State>;

// Holds a connection's slot for its lifetime.
class Ticket {
 public:
  Ticket(StatePtr st, std::uint64_t slot) : st_(std::move(st)), slot_(slot) {}
  ~Ticket() { st_->slots.release(slot_); }
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;

 private:
  StatePtr st_;
  std::uint64_t slot_;
};

void refresh_soon(const StatePtr& st) {
  if (st->refresh_armed || st->stopping || st->clients.empty()) return;
  st->refresh_armed = true;
  st->refresh.expires_after(st->options.snapshot_interval);
  st->refresh.async_wait([st](const boost::system::error_code& ec) {
    st->refresh_armed = false;
    if (ec || st->stopping || st->clients.empty()) return;
    if (auto m = st->snapshot_message()) st->push_all(*m);
  });
}

asio::awaitable<void> ws_writer(std::shared_ptr<WsClient> c) {
  for (const auto& m : c->initial) {
    if (c->closed) co_return;
    auto [ec, n] = co_await c->ws.async_write(asio::buffer(*m), asio::as_tuple(asio::use_awaitable));
    if (ec) {
      c->close();
      co_return;
    }
  }
  c->initial.clear();
  while (!c->closed) {
    if (c->queue.empty()) {
      c->wake.expires_at(asio::steady_timer::time_point::max());
      co_await c->wake.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    Message m = c->queue.front();
    c->queue.pop_front();
    auto [ec, n] = co_await c->ws.async_write(asio::buffer(*m), asio::as_tuple(asio::use_awaitable));
    if (ec) c->close();
  }
}

asio::awaitable<void> serve_websocket(StatePtr st, HttpStream stream, Request req) {
  beast::get_lowest_layer(stream).expires_never();  // the WebSocket's own timeouts from here
  auto c = std::make_shared<WsClient>(std::move(stream));
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = st->options.request_timeout;
  timeouts.idle_timeout = st->options.websocket_idle;
  timeouts.keep_alive_pings = true;
  c->ws.set_option(timeouts);
  c->ws.set_option(websocket::stream_base::decorator(
      [](websocket::response_type& res) { res.set(http::field::server, "runsnack-dashboard"); }));
  c->ws.read_message_max(4096);  // the page sends nothing; bound what a peer may
  c->ws.text(true);
  auto [aec] = co_await c->ws.async_accept(req, asio::as_tuple(asio::use_awaitable));
  if (aec || st->stopping) co_return;
  // Snapshot and registration with no suspension between them: every later event reaches this client once.
  auto snap = st->snapshot_message();
  if (!snap) co_return;
  c->initial.push_back(*snap);
  auto replayed = st->replay.messages();
  c->initial.insert(c->initial.end(), replayed.begin(), replayed.end());
  st->clients.insert(c);
  asio::co_spawn(c->ws.get_executor(), ws_writer(c), log_exceptions("dashboard writer"));
  beast::flat_buffer buffer;
  while (!c->closed) {
    auto [ec, n] = co_await c->ws.async_read(buffer, asio::as_tuple(asio::use_awaitable));
    if (ec) break;
    buffer.consume(buffer.size());  // ignored: the dashboard is read-only
  }
  c->close();
  st->clients.erase(c);
}

// The answer to a request that could not be read, or ok for "just close"
// (the peer left, timed out, or sent half a request).
http::status read_failure_status(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit) return http::status::request_header_fields_too_large;
  if (ec == http::error::body_limit || ec == http::error::buffer_overflow) return http::status::payload_too_large;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) return http::status::ok;
  if (ec.category() == http::make_error_code(http::error::bad_target).category()) return http::status::bad_request;
  return http::status::ok;
}

asio::awaitable<void> serve_http(StatePtr st, tcp::socket socket, std::uint64_t slot) {
  Ticket ticket(st, slot);
  if (!st->slots.holds(slot)) co_return;  // evicted before it started
  HttpStream stream = st->options.tls ? HttpStream(beast::tcp_stream(std::move(socket)), *st->options.tls)
                                      : HttpStream(beast::tcp_stream(std::move(socket)));
  st->http_live[slot] = &stream;
  struct Unlist {  // also when the handshake fails
    StatePtr st;
    std::uint64_t slot;
    bool listed = true;
    ~Unlist() { if (listed) st->http_live.erase(slot); }
  } unlist{st, slot};
  beast::flat_buffer buffer(st->options.max_request_bytes);
  std::optional<Request> upgrade, worker_upgrade;
  // The TLS handshake holds this connection's ticket and runs under the first request's deadline.
  stream.next_layer().expires_after(st->options.request_timeout);
  auto [hec] = co_await stream.async_handshake(asio::as_tuple(asio::use_awaitable));
  if (hec) co_return;
  while (!st->stopping) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(st->options.max_request_bytes));
    parser.body_limit(st->options.max_request_bytes);
    stream.next_layer().expires_after(st->options.request_timeout);
    auto [rec, rn] = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (rec) {
      auto status = read_failure_status(rec);
      if (status != http::status::ok) {
        auto res = error_response(status, 11, status == http::status::bad_request ? "bad request" : "request too large");
        stream.next_layer().expires_after(st->options.request_timeout);
        co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
      }
      break;
    }
    Request req = parser.release();
    std::optional<Response> res = check_request(req, st->routes);
    if (!res && st->worker_socket && wants_worker_socket(req)) {
      worker_upgrade = std::move(req);
      break;
    }
    if (!res && wants_websocket(req)) {
      if (st->clients.size() < st->options.max_websockets) {
        upgrade = std::move(req);
        break;
      }
      res = error_response(http::status::service_unavailable, req.version(), "too many dashboard pages open");
    }
    if (!res) res = answer(req, st->snapshot);
    stream.next_layer().expires_after(st->options.request_timeout);
    auto [wec, wn] = co_await http::async_write(stream, *res, asio::as_tuple(asio::use_awaitable));
    if (wec || !res->keep_alive()) break;
  }
  if ((worker_upgrade || upgrade) && !st->stopping) {
    st->http_live.erase(slot);  // the stream moves on; the WebSocket's own list closes it
    unlist.listed = false;
    st->slots.keep(slot);  // never evicted: the WebSocket caps bound it
  }
  if (worker_upgrade && !st->stopping) {
    co_await st->worker_socket(std::move(stream), std::move(*worker_upgrade));
    co_return;
  }
  if (upgrade && !st->stopping) {
    auto session = serve_websocket(st, std::move(stream), std::move(*upgrade));
    co_await std::move(session);
    co_return;
  }
  if (stream.tls()) {  // a close_notify: the end of a Connection: close answer is not a cut
    co_await stream.async_shutdown(asio::as_tuple(asio::use_awaitable));
    co_return;
  }
  boost::system::error_code ec;
  stream.next_layer().socket().shutdown(tcp::socket::shutdown_send, ec);
}

}  // namespace

Dashboard::Dashboard(asio::any_io_executor ex, DashboardOptions options, SnapshotFn snapshot)
    : ex_(ex), acceptor_(ex), state_(std::make_shared<State>(ex, options, std::move(snapshot))) {
  state_->routes.loopback_only = options.endpoint.address().is_loopback();
  state_->routes.tls = options.tls != nullptr;
  state_->routes.extra_origins = options.extra_origins;
}

Dashboard::~Dashboard() { stop(); }

Result<void> Dashboard::listen() {
  const tcp::endpoint ep = state_->options.endpoint;
  boost::system::error_code ec;
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(errc::io_error, "dashboard: listen on " + http_url(ep) + ": " + ec.message());
  return {};
}

tcp::endpoint Dashboard::local_endpoint() const { return acceptor_.local_endpoint(); }

std::string Dashboard::url() const {
  const std::string url = http_url(local_endpoint());
  return state_->options.tls ? "https" + url.substr(4) : url;
}

asio::awaitable<void> Dashboard::run() {
  while (!state_->stopping) {
    auto [ec, socket] = co_await acceptor_.async_accept(asio::as_tuple(asio::use_awaitable));
    if (state_->stopping) break;
    if (ec) {
      spdlog::warn("dashboard: accept: {}", ec.message());
      asio::steady_timer pause(ex_, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    // A slot before any byte is read, so slow requests and unfinished TLS handshakes count.
    boost::system::error_code oec;
    const tcp::endpoint peer = socket.remote_endpoint(oec);
    if (oec) continue;  // already gone
    const std::string address = address_key(peer.address());
    auto taken = state_->slots.take(address);
    if (taken.evict) {
      spdlog::debug("dashboard: all {} connections taken: closed one of the address holding the most",
                    state_->options.max_connections);
      if (auto it = state_->http_live.find(*taken.evict); it != state_->http_live.end())
        it->second->next_layer().socket().close(oec);
    }
    if (!taken.slot) {
      spdlog::debug("dashboard: {} holds {} connections (cap {} per address, {} in all): closed a new one", address,
                    state_->slots.held(address), state_->options.max_connections_per_address,
                    state_->options.max_connections);
      continue;  // closed as it goes out of scope
    }
    socket.set_option(tcp::no_delay(true), oec);
    asio::co_spawn(ex_, serve_http(state_, std::move(socket), *taken.slot), log_exceptions("dashboard connection"));
  }
}

void Dashboard::stop() {
  state_->stopping = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  state_->refresh.cancel();
  for (const auto& [slot, s] : state_->http_live) s->next_layer().socket().close(ec);
  for (const auto& c : state_->clients) c->close();
}

void Dashboard::publish(const json& event) {
  if (state_->stopping) return;
  std::string name;
  if (event.is_object() && event.contains("event") && event["event"].is_string()) name = event["event"];
  Message m = serialize(event);
  state_->replay.add(name, m);
  state_->push_all(m);
  refresh_soon(state_);
}

void Dashboard::serve_worker_sockets(UpgradeFn serve) { state_->worker_socket = std::move(serve); }

std::size_t Dashboard::websocket_clients() const { return state_->clients.size(); }

}  // namespace runsnack::pool::dashboard
