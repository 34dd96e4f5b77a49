#pragma once
// `pool serve --http ADDR`: the web dashboard (docs/DASHBOARD.md) fed with
// the store's snapshot (pool::PoolSnapshot) and the coordinator's events.
// Without start() it does nothing: publish() and stop() are no-ops and url()
// is null. Not movable once started (the snapshot callback points at it).
// Threading: the coordinator's executor.

#include "pool/dashboard/dashboard.hpp"
#include "pool/pool_snapshot.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::cli {

class PoolDashboard {
 public:
  PoolDashboard() = default;
  PoolDashboard(const PoolDashboard&) = delete;
  PoolDashboard& operator=(const PoolDashboard&) = delete;

  // Parses ADDR and binds it; a bad address or a port in use is an error.
  // tls: {CERT, KEY} PEM files (https), or empty; origins: extra origins for
  // the WebSocket check (a TLS reverse proxy's), each "https://HOST[:PORT]".
  Result<void> start(boost::asio::any_io_executor ex, const std::string& address, pool::PoolStore& store,
                     const std::vector<std::string>& tls = {}, const std::vector<std::string>& origins = {});
  pool::dashboard::Dashboard* server() { return server_.get(); }
  // One coordinator event: counted for reliability and pushed to open pages.
  void publish(const nlohmann::json& event);
  nlohmann::json url() const;  // "http://HOST:PORT/", "https://..." with TLS, or null
  void stop();

 private:
  std::optional<pool::PoolSnapshot> snapshot_;
  std::unique_ptr<pool::dashboard::Dashboard> server_;
};

}  // namespace runsnack::cli
