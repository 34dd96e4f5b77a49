#pragma once
// The two clients of a rendezvous (rdv_server.hpp, wire format in
// rdv_codec.hpp).
//
// ProviderAgent: the provider's one outbound signaling connection. Registers
// the PeerId, live grant ids (never secrets) and candidates, proving the
// PeerId by signing the rendezvous' challenge with the identity key; answers
// keepalives; reconnects with exponential backoff (0.5 s .. 30 s, jittered)
// whenever the connection ends or the rendezvous refuses or drops it, so a
// provider the rendezvous forgot (a restart, a newer registration of the
// same key) registers again by itself.
// On each introduction it starts a TCP simultaneous open from the signaling
// port at the announced moment and, when the rendezvous relays, parks a relay
// connection; whichever connects is handed to `adopt` with its path
// ("punched" or "relayed"), to go through the provider's normal TLS and
// admission. Unused attempts end on their own deadlines.
//
// Consumer side: request_introduction() and open_relay().
//
// Threading: one executor; not thread-safe.

#include "core/error.hpp"
#include "crypto/identity.hpp"
#include "link/endpoint.hpp"
#include "signaling/rdv_codec.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <list>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::rdv {

inline constexpr int kPunchAttempts = 3;
inline constexpr std::chrono::milliseconds kRelayMatchWait{20000};

using AdoptSocket = std::function<void(boost::asio::ip::tcp::socket, std::string path)>;

struct AgentConfig {
  Endpoint server;
  std::string peer;                                   // our PeerId text
  const Identity* identity = nullptr;                 // signs the registration challenge; must outlive the agent
  std::function<std::vector<std::string>()> grants;   // live grant ids, asked before each (re)registration
  std::vector<Endpoint> candidates;                   // our direct candidates
  std::optional<Endpoint> mapped;                     // a port-mapped address, if any
  std::function<void(const std::string& state)> on_state;  // "registered HOST:PORT" / "disconnected: why"
};

// The answer to a rendezvous' registration challenge: `identity` signs the
// nonce bound to `peer` (its PeerId text), proving the PeerId is ours.
Result<Prove> prove_registration(const Identity& identity, const std::string& peer, const Challenge& challenge);

class ProviderAgent {
 public:
  ProviderAgent(boost::asio::any_io_executor ex, AgentConfig config, AdoptSocket adopt);
  ProviderAgent(const ProviderAgent&) = delete;
  ProviderAgent& operator=(const ProviderAgent&) = delete;

  boost::asio::awaitable<void> run();  // until stop()
  // Closes the signaling connection and cancels every punch and relay task
  // it started, so the executor runs dry promptly (the owner's exit path).
  void stop();
  // A port mapping found after start (the router answers in seconds, the
  // link is printed at once): registers again at once with it, so that
  // consumers looking the PeerId up learn it without a new link.
  void set_mapped(const Endpoint& mapped);

 private:
  boost::asio::awaitable<Result<void>> session();
  Result<Prove> prove(const Challenge& challenge) const;
  // Runs `task` owned by this agent: stop() cancels it; it logs its own end.
  void spawn_task(boost::asio::awaitable<void> task, const char* what);
  std::list<boost::asio::cancellation_signal> tasks_;  // one per running punch/relay task
  boost::asio::any_io_executor ex_;
  AgentConfig config_;
  AdoptSocket adopt_;
  boost::asio::steady_timer backoff_;
  boost::asio::ip::tcp::socket* current_ = nullptr;
  bool stopping_ = false;
  bool register_again_ = false;  // set_mapped closed the connection: no backoff, no "disconnected"
};

struct Introduction {
  boost::asio::ip::tcp::socket signaling;  // keep open while punching: it holds our NAT mapping
  boost::asio::ip::tcp::endpoint local;    // the port to punch from
  Intro intro;
  std::chrono::steady_clock::time_point received;
};

// Asks `server` to introduce us to `peer` for `grant`. The signaling socket is
// bound with port reuse so that a punch can share its local port.
boost::asio::awaitable<Result<Introduction>> request_introduction(const Endpoint& server, const std::string& peer,
                                                                  const std::string& grant,
                                                                  std::vector<Endpoint> candidates,
                                                                  std::chrono::milliseconds timeout);

// Opens a relay connection and waits until the rendezvous has matched the
// other side (relay_ok). The socket then carries the peers' bytes.
boost::asio::awaitable<Result<boost::asio::ip::tcp::socket>> open_relay(const Endpoint& server,
                                                                        const std::string& token,
                                                                        const std::string& side,
                                                                        std::chrono::milliseconds timeout);

}  // namespace runsnack::rdv
