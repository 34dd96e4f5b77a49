#pragma once
// The pool's web dashboard server (docs/DASHBOARD.md): HTTP for the page and
// a snapshot (routes in http_routes.hpp), and a WebSocket at /ws that sends
// {"event":"snapshot","snapshot":<snapshot()>} on connect, then replays recent
// events and render tiles (event_replay.hpp), then pushes every publish()ed
// event as it happens, and a fresh snapshot at most every snapshot_interval
// after events, so the page needs no polling. Read-only: only GET.
//
// With options.tls the same over TLS (https://, wss://): the handshake runs
// under the first request's deadline and holds a connection slot like any
// request, so clients that never finish it are bounded like slow ones.
//
// Bounds: connections (HTTP and WebSocket together, and from one address,
// shared fairly: connection_slots.hpp), WebSocket clients,
// request size, a deadline on every HTTP read and write (and TLS handshake), idle WebSockets
// pinged and closed when they stop answering, and a cap on each client's
// queue: a browser that falls that far behind is disconnected (its page
// reconnects and starts again from a fresh snapshot), so it never holds the
// coordinator's memory.
//
// The snapshot callback runs on the executor, when a page asks for it and
// after events (coalesced); it must not block for long.
// Threading: one executor (single-threaded io_context); not thread-safe.
// Outlives nothing it is given: stop() (or the destructor) closes every
// connection; coroutines still finishing hold only the shared state.

#include "core/error.hpp"
#include "pool/dashboard/connection_slots.hpp"
#include "pool/dashboard/http_routes.hpp"
#include "pool/dashboard/http_stream.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace runsnack::pool::dashboard {

// Serves a checked WebSocket upgrade to /worker (pool/browser/BrowserWorkers).
using UpgradeFn = std::function<boost::asio::awaitable<void>(HttpStream, Request)>;

struct DashboardOptions {
  // Loopback unless the user binds elsewhere on purpose (--http 0.0.0.0:PORT).
  boost::asio::ip::tcp::endpoint endpoint{boost::asio::ip::address_v4::loopback(), 8080};
  std::size_t max_connections = 64;        // HTTP and WebSocket together; more are closed at once
  // From one IPv4 address or IPv6 /64: a quarter, so that one address holding connections open (slow
  // requests, unfinished TLS handshakes) leaves the rest to others; more are closed at once.
  std::size_t max_connections_per_address = 16;
  std::size_t max_websockets = 16;         // more get 503
  std::size_t max_queued_messages = 1024;  // per WebSocket; past it the client is dropped
  std::size_t max_request_bytes = 8192;    // request line, headers and body
  std::chrono::milliseconds request_timeout{10000};   // each HTTP read or write
  std::chrono::milliseconds websocket_idle{60000};    // pinged at half; closed when silent
  std::chrono::milliseconds snapshot_interval{250};   // fresh snapshots after events, at most this often
  std::size_t replay_events = 100;                    // recent events sent to a new page
  std::size_t replay_tile_bytes = 32 * 1024 * 1024;   // render tiles sent to a new page
  std::shared_ptr<const TlsContext> tls;              // set: https only (load_tls_context)
  // Origins also accepted by the WebSocket origin check (and their hosts by
  // the Host check): a TLS reverse proxy's "https://pool.example.org".
  std::vector<std::string> extra_origins;
};

class Dashboard {
 public:
  Dashboard(boost::asio::any_io_executor ex, DashboardOptions options, SnapshotFn snapshot);
  ~Dashboard();
  Dashboard(const Dashboard&) = delete;
  Dashboard& operator=(const Dashboard&) = delete;

  // Binds options.endpoint (port 0: any free port).
  Result<void> listen();
  boost::asio::ip::tcp::endpoint local_endpoint() const;
  std::string url() const;  // "http://127.0.0.1:8080/", "https://..." with TLS
  // Accepts connections until stop().
  boost::asio::awaitable<void> run();
  void stop();

  // Sends `event` (a JSON object with "event") to every open page.
  void publish(const nlohmann::json& event);
  // Upgrades to /worker go to `serve` (without it they get 404).
  void serve_worker_sockets(UpgradeFn serve);
  std::size_t websocket_clients() const;

  struct State;  // shared with the connection coroutines

 private:
  boost::asio::any_io_executor ex_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<State> state_;
};

}  // namespace runsnack::pool::dashboard
