#pragma once
// The rendezvous server: signaling for providers and consumers, and a relay
// that splices two matched connections (docs/ARCHITECTURE.md section 5; the wire
// format is in rdv_codec.hpp). It keeps everything in memory and stores
// nothing on disk; a restart forgets registrations, providers reconnect.
//
// Who may do what is the Registry's (registry.hpp): a provider registers only
// the PeerId whose key signs the rendezvous' challenge; introductions, with
// the consumer's addresses and relay tokens, go only to such a registration;
// a relay pair is one authenticated provider and the consumer introduced to
// it, each with its own single-use token.
//
// Bounds (per client IP unless said otherwise): open connections, pending
// introductions, registrations waiting for their proof, relay sides; per
// spliced pair and direction a rate (max_relay_mbps) and a byte total
// (max_relay_bytes), both on by default; relay budgets over time per
// provider key and per client address, and the operator's list of keys it
// relays for (relay_budget.hpp: budgets, relay_only_for); a first message (and a proof)
// within first_message_timeout; a provider that misses keepalives is
// dropped; a relay side that stops reading stalls only its own pair and is
// closed when a write has waited relay_write_timeout. Messages are read as
// they arrive (at most kMaxRdvMessageBytes). Abuse is logged, rate-limited.
//
// Threading: one executor (single-threaded io_context); not thread-safe.

#include "core/error.hpp"
#include "link/endpoint.hpp"
#include "rendezvous/registry.hpp"
#include "rendezvous/relay_budget.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

namespace runsnack::rdv {

struct ServerOptions {
  std::string listen_address = "0.0.0.0";
  std::uint16_t port = 7443;
  bool relay = true;
  // Per spliced pair and direction, so anyone with a key of their own (who
  // can register and introduce themselves) gets a bounded relay; 0: unlimited.
  double max_relay_mbps = 100;
  std::uint64_t max_relay_bytes = 10'000'000'000;  // then the pair is closed
  // Over time: bytes per provider key and per client address in a window
  // (2 GiB and 4 GiB an hour by default); spent, new relays are refused with
  // the reason and running ones closed.
  RelayBudgetLimits budgets;
  std::set<std::string> relay_only_for;  // provider PeerIds to relay for; empty: any proven key
  std::size_t max_connections_per_ip = 256;
  RegistryLimits registry;  // providers, per-IP introductions, proofs and relay sides
  std::chrono::milliseconds first_message_timeout{5000};
  std::chrono::milliseconds keepalive{10000};  // ping interval; 3 missed: dropped
  std::chrono::milliseconds relay_write_timeout{60000};
  std::chrono::milliseconds punch_margin{40};  // added to the slower side's one-way delay
};

struct ServerStats {
  std::size_t connections = 0;
  std::size_t providers = 0;  // authenticated registrations
  std::size_t relays_waiting = 0;
  std::size_t relays_spliced = 0;
  std::uint64_t relay_bytes = 0;
  std::size_t budget_keys = 0;       // provider keys with a relay budget being counted
  std::size_t budget_addresses = 0;  // addresses likewise
  std::uint64_t relays_refused = 0;  // relay sides refused by the budgets or the key list
  std::uint64_t relays_cut = 0;      // spliced pairs closed when a budget was spent
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
