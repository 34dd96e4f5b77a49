#pragma once
// The rendezvous server: signaling for providers and consumers, and a relay
// that splices two matched connections (ARCHITECTURE.md section 5; the wire
// format is in rdv_codec.hpp). It keeps everything in memory and stores
// nothing on disk; a restart forgets registrations, providers reconnect.
//
// Bounds (per client IP unless said otherwise): open connections, pending
// introductions, relay bandwidth per spliced pair; a first message within
// first_message_timeout; a provider that misses keepalives is dropped; a
// relay side that stops reading stalls only its own pair and is closed when
// a write has waited relay_write_timeout. Abuse is logged, rate-limited.
//
// Relay rule: a token is minted for one introduction; one provider side and
// one consumer side may present it; bytes flow only once both are there, and
// the token is spent, so no third party can join a spliced pair.
//
// Threading: one executor (single-threaded io_context); not thread-safe.

#include "core/error.hpp"
#include "link/endpoint.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace runsnack::rdv {

struct ServerOptions {
  std::string listen_address = "0.0.0.0";
  std::uint16_t port = 7443;
  bool relay = true;
  double max_relay_mbps = 0;  // per spliced pair and direction; 0: unlimited
  // Bytes one spliced pair may move in each direction before the pair is
  // closed, so one client cannot use a public relay without bound; 0: unlimited.
  std::uint64_t max_relay_bytes = 0;
  std::size_t max_connections_per_ip = 256;
  std::size_t max_pending_intros_per_ip = 16;
  std::size_t max_providers = 100000;
  std::chrono::milliseconds first_message_timeout{5000};
  std::chrono::milliseconds keepalive{10000};  // ping interval; 3 missed: dropped
  std::chrono::milliseconds relay_match_timeout{15000};
  std::chrono::milliseconds relay_write_timeout{60000};
  std::chrono::milliseconds punch_margin{40};  // added to the slower side's one-way delay
};

struct ServerStats {
  std::size_t connections = 0;
  std::size_t providers = 0;
  std::size_t relays_waiting = 0;
  std::size_t relays_spliced = 0;
  std::uint64_t relay_bytes = 0;
};

class Server {
 public:
  Server(boost::asio::any_io_executor ex, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  Result<void> listen();
  boost::asio::ip::tcp::endpoint local_endpoint() const;
  boost::asio::awaitable<void> run();  // until stop()
  void stop();
  ServerStats stats() const;

  struct State;  // the registries, shared with connection coroutines

 private:
  boost::asio::any_io_executor ex_;
  ServerOptions options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<State> state_;
};

}  // namespace runsnack::rdv
