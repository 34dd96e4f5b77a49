#pragma once
// The pool coordinator's stream handlers: it is a Provider (same sessions,
// grants and revocation) with two services, "pool-worker" for workers that
// came by the join link and "pool-client" for consumers that came by the
// submit link (wire.hpp for the message shapes). State lives in PoolStore;
// the worker ops and what they keep in memory (waiting devices, the learned
// scheduler or part 1's fastest-first policy, verification) are WorkerOps
// (worker_ops.hpp), without I/O; this class reads and writes the streams,
// passes each message to them or to ClientOps (client_ops.hpp) and runs lease
// expiry and the stall watch.
//
// A worker's stream has an idle deadline: any message renews its leases, and
// silence for kWorkerIdleTimeout ends the stream and requeues its tasks, as
// does the session ending (a lost worker or a revoked join link).
//
// Threading: one executor, like Provider. Must outlive the Provider using it.

#include "pool/pool_store.hpp"
#include "pool/stall_watch.hpp"
#include "pool/client_ops.hpp"
#include "pool/worker_ops.hpp"
#include "provider/service_router.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

namespace runsnack::pool {

inline constexpr const char* kServiceWorker = "pool-worker";
inline constexpr const char* kServiceClient = "pool-client";
// Workers send a message at least every few seconds (claim polls, heartbeats).
inline constexpr std::chrono::milliseconds kWorkerIdleTimeout{20000};
// Pending tasks of a job the stall watch looks at (past these it assumes
// one of them can run: a false "stuck" would fail a job that could finish).
inline constexpr std::int64_t kStallScan = 256;

class Coordinator {
 public:
  Coordinator(boost::asio::any_io_executor ex, PoolStore& store, std::function<void(const nlohmann::json&)> on_event);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  void add_services(ServiceRouter& router);
  // Claims decided by the learned multi-objective scheduler
  // (pool/scheduling/) instead of fastest-free-device first (`pool serve`
  // does this unless given --scheduler fastest). Loads what it learned
  // before a restart from the store.
  void use_learned_scheduler();
  // What the learned scheduler believes of a device (nothing: no learned
  // scheduler, or nothing learned): per workload, its expected task seconds,
  // observations and success rate. Shown by `pool status`.
  nlohmann::json learned_estimates(const std::string& device) const;
  // Expires leases every 250 ms until stop().
  boost::asio::awaitable<void> run_maintenance();
  void stop();

  boost::asio::awaitable<void> serve_worker(std::shared_ptr<MuxStream> stream, ServiceContext context);
  boost::asio::awaitable<void> serve_client(std::shared_ptr<MuxStream> stream, ServiceContext context);

  // A worker on another transport than a "pool-worker" stream (a browser's
  // WebSocket, pool/browser/): the same requests and answers, no binary
  // frames. opened and closed bracket its life as a stream's do; the caller
  // enforces kWorkerIdleTimeout. Defined in coordinator_link.cpp.
  struct LinkedWorker {
    WorkerSession session;  // filled from the context at its first request
  };
  void linked_worker_opened(const ServiceContext& context);
  nlohmann::json linked_worker_request(const nlohmann::json& req, const ServiceContext& context, LinkedWorker& worker);
  void linked_worker_closed(const ServiceContext& context, LinkedWorker& worker, const std::string& why);

 private:
  // Fails the jobs no online worker may serve any more (stall_watch.hpp).
  void give_up_stuck_jobs(const Moment& now);

  boost::asio::any_io_executor ex_;
  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  WorkerOps ops_;
  Trainer trainer_;
  ClientOps client_ops_;
  std::uint64_t ticks_ = 0;  // maintenance rounds
  boost::asio::steady_timer maintenance_timer_;
  bool stopping_ = false;
  StallWatch stalls_;
};

}  // namespace runsnack::pool
