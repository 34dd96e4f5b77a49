#pragma once
// Browser workers' WebSocket (the /join page's /worker socket, on the
// dashboard's HTTP port; protocol in browser_protocol.hpp): challenges the
// page, checks its proof of the join link against the grant store (live,
// not revoked, not expired, allows "pool-worker", max_sessions), counts the
// use, then relays its worker requests to the Coordinator as a linked worker.
//
// Bounds on what a hostile browser can make us hold: sockets in all and per
// address (more get 503 before the upgrade), one pending challenge per
// socket and a deadline to answer it, the auth message's size, each later
// message's size (kMaxBrowserMessageBytes), one request at a time, and the
// coordinator's worker idle deadline. A live grant is re-checked every
// `recheck`: revoking the join link ends its browser workers too.
//
// Threading: the coordinator's executor; not thread-safe. stop() closes
// every socket; coroutines still finishing hold only the shared state.

#include "pool/coordinator.hpp"
#include "pool/dashboard/http_routes.hpp"
#include "pool/dashboard/http_stream.hpp"
#include "store/database.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <memory>

namespace runsnack::pool::browser {

struct BrowserWorkerLimits {
  std::size_t max_sockets = 64;
  std::size_t max_per_address = 4;
  std::chrono::milliseconds auth_timeout{10000};
  std::chrono::milliseconds idle_timeout = kWorkerIdleTimeout;
  std::chrono::milliseconds recheck{10000};
};

class BrowserWorkers {
 public:
  BrowserWorkers(Coordinator& coordinator, Database& db, BrowserWorkerLimits limits = {});
  ~BrowserWorkers();
  BrowserWorkers(const BrowserWorkers&) = delete;
  BrowserWorkers& operator=(const BrowserWorkers&) = delete;

  // Serves one checked upgrade request for /worker until the socket closes.
  boost::asio::awaitable<void> serve(dashboard::HttpStream stream, dashboard::Request request);
  void stop();
  std::size_t sockets() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace runsnack::pool::browser
