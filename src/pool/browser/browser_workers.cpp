#include "pool/browser/browser_workers.hpp"

#include "core/clock.hpp"
#include "core/json_fields.hpp"
#include "link/grant.hpp"
#include "pool/browser/browser_protocol.hpp"
#include "store/grant_store.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/websocket/stream.hpp>
#include <spdlog/spdlog.h>

#include <map>
#include <set>

namespace runsnack::pool::browser {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using json = nlohmann::json;
using Socket = websocket::stream<dashboard::HttpStream>;

struct BrowserWorkers::State {
  State(Coordinator& c, Database& d, BrowserWorkerLimits l) : coordinator(c), db(d), limits(l) {}
  Coordinator& coordinator;
  Database& db;
  BrowserWorkerLimits limits;
  bool stopping = false;
  std::set<Socket*> live;
  std::map<std::string, std::size_t> per_address;  // IP -> open sockets
  std::map<std::string, std::int64_t> per_grant;   // grant id -> authenticated sockets
};

namespace {

using StatePtr = std::shared_ptr<BrowserWorkers::State>;

void close_socket(Socket& ws) {
  boost::system::error_code ec;
  beast::get_lowest_layer(ws).socket().close(ec);
}

// Built outside the coroutines: GCC 12 miscompiles braced JSON with string literals inside one.
json refusal(const std::string& why) { return {{"ok", false}, {"error", why}}; }
json welcome(const PeerId& peer) { return {{"ok", true}, {"peer", peer.str()}}; }

asio::awaitable<bool> send(Socket& ws, const json& msg) {
  const std::string text = msg.dump(-1, ' ', false, json::error_handler_t::replace);
  auto [ec, n] = co_await ws.async_write(asio::buffer(text), asio::as_tuple(asio::use_awaitable));
  co_return !ec;
}

asio::awaitable<std::optional<std::string>> receive(Socket& ws) {
  beast::flat_buffer buffer;
  auto [ec, n] = co_await ws.async_read(buffer, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return std::nullopt;
  co_return beast::buffers_to_string(buffer.data());
}

// The grant the page proves, checked as the provider checks a session's.
Result<Grant> admit(const StatePtr& st, const BrowserAuth& auth, const std::string& nonce, PeerId& peer) {
  GrantStore grants(st->db);
  auto found = grants.find(auth.grant);
  if (!found) return found.error();
  if (!*found) return fail(errc::auth_failed, "unknown join link");
  const Grant& grant = **found;
  auto who = verify_auth(auth, grant.key, nonce);
  if (!who) return who.error();
  peer = *who;
  if (!grant_allows_service(grant, kServiceWorker)) return fail(errc::refused, "this link is not a pool join link");
  const auto now = SystemClock::instance().now();
  auto decision = check_grant(grant, now, st->per_grant[grant.id], peer.str());
  if (!decision.accepted) return fail(decision.code, decision.reason);
  auto used = grants.record_use(grant.id, peer.str(), now);
  if (!used) return used.error();
  if (!*used) return fail(errc::refused, "the join link no longer allows this use");
  return grant;
}

// Whether the grant still holds (not revoked, not expired).
bool still_granted(const StatePtr& st, const std::string& id) {
  GrantStore grants(st->db);
  auto found = grants.find(id);
  if (!found || !*found) return false;
  return !check_live_session(**found, SystemClock::instance().now());
}

std::string address_of(const dashboard::HttpStream& stream, std::string& ip) {
  boost::system::error_code ec;
  auto ep = stream.next_layer().socket().remote_endpoint(ec);
  if (ec) return ip = "", "";
  ip = ep.address().to_string();
  return ep.address().is_v6() ? "[" + ip + "]:" + std::to_string(ep.port()) : ip + ":" + std::to_string(ep.port());
}

// After a good "auth": the worker requests until the socket closes.
asio::awaitable<std::string> relay(const StatePtr& st, Socket& ws, const ServiceContext& ctx,
                                   Coordinator::LinkedWorker& worker) {
  auto checked = std::chrono::steady_clock::now();
  while (!st->stopping) {
    auto text = co_await receive(ws);
    if (!text) co_return std::string("socket closed");
    if (std::chrono::steady_clock::now() - checked > st->limits.recheck) {
      checked = std::chrono::steady_clock::now();
      if (!still_granted(st, ctx.grant.id)) {
        co_await send(ws, refusal("the join link was revoked or expired"));
        co_return std::string("join link revoked or expired");
      }
    }
    auto req = parse_request(*text);
    const json answer = req ? st->coordinator.linked_worker_request(*req, ctx, worker) : refusal(req.error().what());
    if (!co_await send(ws, answer)) co_return std::string("socket closed");
    if (!req) co_return std::string("bad message: ") + req.error().what();  // out of step: close
  }
  co_return std::string("coordinator stopping");
}

}  // namespace

BrowserWorkers::BrowserWorkers(Coordinator& coordinator, Database& db, BrowserWorkerLimits limits)
    : state_(std::make_shared<State>(coordinator, db, limits)) {}

BrowserWorkers::~BrowserWorkers() { stop(); }

void BrowserWorkers::stop() {
  state_->stopping = true;
  for (auto* ws : state_->live) close_socket(*ws);
}

std::size_t BrowserWorkers::sockets() const { return state_->live.size(); }

asio::awaitable<void> BrowserWorkers::serve(dashboard::HttpStream stream, dashboard::Request request) {
  StatePtr st = state_;
  std::string ip;
  const std::string address = address_of(stream, ip);
  if (st->stopping || st->live.size() >= st->limits.max_sockets || st->per_address[ip] >= st->limits.max_per_address) {
    if (st->per_address[ip] == 0) st->per_address.erase(ip);
    auto res = dashboard::error_response(beast::http::status::service_unavailable, request.version(),
                                         "too many browser workers from this address or in all");
    co_await beast::http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    co_return;
  }
  beast::get_lowest_layer(stream).expires_never();  // the WebSocket's own timeouts from here
  Socket ws(std::move(stream));
  ++st->per_address[ip];
  st->live.insert(&ws);
  struct Leave {
    StatePtr st;
    Socket* ws;
    std::string ip;
    ~Leave() {
      st->live.erase(ws);
      if (--st->per_address[ip] == 0) st->per_address.erase(ip);
    }
  } leave{st, &ws, ip};
  websocket::stream_base::timeout timeouts{};
  timeouts.handshake_timeout = st->limits.auth_timeout;
  timeouts.idle_timeout = st->limits.idle_timeout;  // a worker that stops talking is gone
  timeouts.keep_alive_pings = false;
  ws.set_option(timeouts);
  ws.read_message_max(kMaxAuthMessageBytes);
  ws.text(true);
  auto [aec] = co_await ws.async_accept(request, asio::as_tuple(asio::use_awaitable));
  if (aec || st->stopping) co_return;

  // The challenge must be answered within auth_timeout.
  asio::steady_timer deadline(ws.get_executor(), st->limits.auth_timeout);
  deadline.async_wait([&ws](const boost::system::error_code& ec) {
    if (!ec) close_socket(ws);
  });
  const std::string nonce = make_nonce();
  if (!co_await send(ws, challenge_message(nonce))) co_return;
  auto text = co_await receive(ws);
  deadline.cancel();
  if (!text) co_return;
  PeerId peer;
  auto auth = parse_auth(*text);
  auto grant = auth ? admit(st, *auth, nonce, peer) : Result<Grant>(auth.error());
  if (!grant) {
    spdlog::info("pool: browser worker from {} refused: {}", address, grant.error().what());
    co_await send(ws, refusal(grant.error().what()));
    co_return;
  }
  if (!co_await send(ws, welcome(peer))) co_return;
  ws.read_message_max(kMaxBrowserMessageBytes);

  ServiceContext ctx;
  ctx.session_id = "browser-" + make_nonce().substr(0, 16);
  ctx.consumer = peer;
  ctx.grant = *grant;
  ctx.address = address;
  ++st->per_grant[grant->id];
  st->coordinator.linked_worker_opened(ctx);
  Coordinator::LinkedWorker worker;
  std::string why = co_await relay(st, ws, ctx, worker);
  if (--st->per_grant[grant->id] <= 0) st->per_grant.erase(grant->id);
  close_socket(ws);
  st->coordinator.linked_worker_closed(ctx, worker, why);
}

}  // namespace runsnack::pool::browser
