#pragma once
// A provider as a command runs it (`share`, `pool serve`): the Provider
// listening with its options, the rendezvous agent registering this
// database's live grants, the router's port mapping asked for in the
// background and renewed, and the links it mints. The commands keep their
// flags and printing; what happens is reported through HostEvents.
//
// The port mapping (docs/ARCHITECTURE.md section 5.1) is asked for on a
// thread of its own after start(), since a router that does not answer takes
// seconds; a mapping found later is registered again at the rendezvous so
// consumers learn it there, renewed at half of its lease, and removed from the
// router when the host is destroyed. None is asked for a loopback listener.
//
// Threading: one executor (single-threaded io_context), like Provider. The
// destructor waits for the router's answer if one is still being asked for.

#include "crypto/identity.hpp"
#include "link/endpoint.hpp"
#include "net/port_mapping.hpp"
#include "provider/provider.hpp"
#include "provider/service_router.hpp"
#include "signaling/rdv_client.hpp"
#include "store/database.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace runsnack {

// The router's port mapping lease; renewed at half of it while serving, so a
// router that enforces leases never drops a live provider's mapping.
inline constexpr std::chrono::duration<std::uint32_t> kMappingLease{7200};

// Links with a rendezvous stay short enough to type and to fit a small QR code.
inline constexpr std::size_t kMaxRendezvousLinkChars = 159;

struct HostOptions {
  ProviderOptions provider;             // listen address, ports, session limits
  std::optional<Endpoint> rendezvous;   // register there (signaling/rdv_client.hpp), for consumers behind NAT
  bool port_mapping = true;             // ask the router (NAT-PMP, UPnP-IGD)
};

// What the host reports; each may be empty.
struct HostEvents {
  ProviderEventSink provider;                                  // session_open, session_closed, refused
  std::function<void(const std::string& state)> rendezvous;    // "registered HOST:PORT" / "disconnected: why"
  std::function<void(const PortMapping& mapping)> mapped;      // a mapping found (not when stopping)
  std::function<void(const std::string& why)> not_mapped;      // the router gave none
};

// A link's text: `candidates` (at most kMaxLinkCandidates) and, with a
// rendezvous, only the first candidates that fit kMaxRendezvousLinkChars
// (the consumer learns every candidate from the rendezvous).
std::string mint_link(const std::optional<Endpoint>& rendezvous, std::vector<Endpoint> candidates,
                      const PeerId& provider, const std::string& grant_id, const std::string& secret);

class ProviderHost {
 public:
  // `identity` and `db` must outlive the host.
  ProviderHost(boost::asio::any_io_executor ex, const Identity& identity, Database& db, HostOptions options,
               ServiceRouter services, HostEvents events);
  ~ProviderHost();
  ProviderHost(const ProviderHost&) = delete;
  ProviderHost& operator=(const ProviderHost&) = delete;

  Result<void> listen();
  // After listen(): the addresses links name, and the listening socket's.
  std::vector<Endpoint> candidates() const { return provider_.candidates(); }
  boost::asio::ip::tcp::endpoint local_endpoint() const { return provider_.local_endpoint(); }
  const std::optional<Endpoint>& rendezvous() const { return options_.rendezvous; }
  // The link to grant `grant_id` (mint_link with this host's candidates and rendezvous).
  std::string link(const std::string& grant_id, const std::string& secret) const;
  ProviderStats stats() const { return provider_.stats(); }

  // After listen(): serves (Provider::run), registers at the rendezvous and
  // asks for the port mapping. `on_end` runs once the Provider's run ended,
  // by stop() or a failure (logged); the host then stops the rest too.
  void start(std::function<void()> on_end);
  // Ends serving, the agent and the mapping's renewal; the executor then runs dry.
  void stop();

 private:
  struct MappingAnswer {
    std::unique_ptr<PortMapping> mapping;
    std::string why;
  };
  void ask_for_mapping();
  void take_mapping_answer();
  void renew_mapping_later();

  boost::asio::any_io_executor ex_;
  const Identity& identity_;
  Database& db_;
  HostOptions options_;
  HostEvents events_;
  Provider provider_;
  std::unique_ptr<rdv::ProviderAgent> agent_;
  boost::asio::steady_timer mapping_timer_;
  bool stopping_ = false;
  std::unique_ptr<PortMapping> mapping_;  // removed from the router when the host goes
  std::promise<MappingAnswer> mapping_promise_;
  std::future<MappingAnswer> mapping_answer_ = mapping_promise_.get_future();
  std::jthread mapping_asker_;  // last: joined before what it answers to goes
};

}  // namespace runsnack
