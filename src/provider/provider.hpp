#pragma once
// The provider role: listens, admits consumers by grant, serves their
// streams, and ends sessions whose grant is revoked or expires.
//
// Every connection has one deadline until it is admitted (TLS handshake and
// auth message together), and at most `max_pending_per_address` connections
// from one address (`max_pending` in all) may be that far at once; a new one
// past that closes the oldest (admission_slots.hpp), so garbage or stalled
// peers from one address cannot starve real consumers from another.
// Refusals before a proof are audited aggregated per address
// (admission_audit.hpp); connections their peer closes before saying anything
// (a dial race's losers) are not refusals, only counted (abandoned_connections.hpp).
// The audit log is pruned to kAuditKeepRows rows
// and kAuditKeepAge at start and hourly. A live
// session is watched every `watch_interval`: a `runsnack revoke` from another
// process, `runsnack kick` of the session (its row in the sessions table,
// store/session_store.hpp), or the expiry time passing, ends it within about that long.
//
// Audit records of services that ask for it (ServiceEntry::batch_audit) are
// queued and written together, one transaction per kAuditBatchDelay or
// kAuditBatchMax records; stop() and the destructor write what is queued, so
// a clean shutdown loses none (a crash may lose the last kAuditBatchDelay).
//
// Threading: one executor (single-threaded io_context); not thread-safe.

#include "crypto/identity.hpp"
#include "link/link.hpp"
#include "net/listener.hpp"
#include "net/tls_stream.hpp"
#include "provider/abandoned_connections.hpp"
#include "provider/admission.hpp"
#include "provider/admission_audit.hpp"
#include "provider/admission_slots.hpp"
#include "provider/service_router.hpp"
#include "store/audit_log.hpp"
#include "store/database.hpp"
#include "store/grant_store.hpp"
#include "store/session_store.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runsnack {

inline constexpr std::chrono::milliseconds kAuditBatchDelay{100};
inline constexpr std::size_t kAuditBatchMax = 256;
// The audit log's default retention (`runsnack log --prune` applies others).
inline constexpr std::int64_t kAuditKeepRows = 100'000;
inline constexpr std::chrono::hours kAuditKeepAge{24 * 90};

struct ProviderOptions {
  std::string listen_address = "0.0.0.0";
  PortRange ports{};
  std::chrono::milliseconds handshake_timeout{5000};  // TLS + auth message, together
  std::size_t max_pending = 256;
  std::size_t max_pending_per_address = 8;
  SessionLimits sessions;  // admitted sessions open at once, in all and per address (admission.hpp)
  std::chrono::seconds refusal_interval{60};  // aggregation of unproven refusals (admission_audit.hpp)
  std::chrono::milliseconds watch_interval{250};
};

struct ProviderStats {
  std::size_t sessions = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
};

// One JSON object per event: {"event":"session_open"|"session_closed"|"refused", ...}.
using ProviderEventSink = std::function<void(const nlohmann::json&)>;

class Provider {
 public:
  Provider(boost::asio::any_io_executor ex, const Identity& identity, Database& db, ProviderOptions options,
           ServiceRouter services, ProviderEventSink on_event);
  ~Provider();
  Provider(const Provider&) = delete;
  Provider& operator=(const Provider&) = delete;

  Result<void> listen();
  std::vector<Endpoint> candidates() const;  // valid after listen()
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  // Accepts and watches until stop(). Exceptions from connections are logged
  // where they are spawned; run() itself only returns.
  boost::asio::awaitable<void> run();
  void stop();

  // A TCP connection that reached us another way (net/punch.hpp, the
  // rendezvous relay): TLS and admission as for an accepted one; `path`
  // ("punched", "relayed") goes into events and the audit log.
  void adopt(boost::asio::ip::tcp::socket socket, std::string path);

  ProviderStats stats() const;

 private:
  struct LiveSession;
  boost::asio::awaitable<void> accept_loop();
  boost::asio::awaitable<void> watch_loop();
  boost::asio::awaitable<void> handle_connection(boost::asio::ip::tcp::socket socket, std::string path);
  boost::asio::awaitable<void> serve_session(std::shared_ptr<LiveSession> live);
  boost::asio::awaitable<void> handle_stream(std::shared_ptr<LiveSession> live, std::shared_ptr<MuxStream> stream);
  // Ends `live`: `ended` is the word (session/goodbye.hpp: kEnded*), `reason` the words, both told to
  // its consumer before the session closes (say_goodbye) and written to the audit log.
  void end_session(LiveSession& live, const char* ended, const std::string& reason);
  void end_kicked_sessions();  // those `runsnack kick` marked in the sessions table
  void refused(const std::string& address, const std::string& peer, const std::string& reason);
  // A refusal anyone can repeat at will (before a proof, per address; a
  // refused stream, per session): aggregated per key (admission_audit.hpp).
  // True when it was written at once (the key's first in this interval).
  bool audit_refusal(AuditEvent ev, const std::string& key);
  void flush_refusals(bool all);
  void prune_audit();
  void evict(std::uint64_t slot);  // closes a pending connection to make room (AdmissionSlots)
  void audit(AuditEvent ev);
  void audit_batched(AuditEvent ev);
  void flush_audit();

  boost::asio::any_io_executor ex_;
  ProviderOptions options_;
  ServiceRouter services_;
  ProviderEventSink on_event_;
  boost::asio::ssl::context tls_;
  GrantStore grants_;
  AuditLog audit_;
  SessionStore session_rows_;  // live sessions as `runsnack links/sessions/kick` see them
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer watch_timer_;
  std::vector<AuditEvent> audit_queue_;  // audit_batched() records not yet written
  boost::asio::steady_timer audit_timer_;
  bool audit_timer_armed_ = false;
  std::shared_ptr<char> audit_alive_ = std::make_shared<char>();  // expires with the Provider (audit, command rows)
  std::map<std::string, std::shared_ptr<LiveSession>> sessions_;
  AdmissionSlots slots_;
  std::map<std::uint64_t, TlsStream*> handshaking_;  // by slot: what evict() closes
  std::map<std::uint64_t, bool> evicted_;            // slots closed to make room, for their audit reason
  RefusalTally refusals_;
  AbandonTally abandoned_;  // connections closed by their peer before authenticating
  std::chrono::steady_clock::time_point pruned_at_{};
  std::uint64_t closed_bytes_in_ = 0;
  std::uint64_t closed_bytes_out_ = 0;
  bool stopping_ = false;
};

}  // namespace runsnack
