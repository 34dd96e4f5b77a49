#pragma once
// Deciding whether an authenticated TLS peer gets a session: grant lookup,
// proof check, policy (link/grant.hpp), counting the use, and writing the
// decision to the audit log, accepted or refused, with the reason.
//
// The proof is checked before the policy so that only a holder of the
// secret learns whether a link is expired, full or revoked. Refusals
// before the proof holds (unknown link, wrong secret) are the work of anyone
// with a TCP connection: with an `unproven` sink they go there (the provider
// aggregates them per address, admission_audit.hpp) instead of the log.

#include "core/clock.hpp"
#include "crypto/peer_id.hpp"
#include "link/grant.hpp"
#include "session/auth.hpp"
#include "store/audit_log.hpp"
#include "store/grant_store.hpp"

#include <array>
#include <functional>
#include <span>
#include <string>

namespace runsnack {

struct AdmissionRequest {
  PeerId consumer;
  std::string address;                   // host:port the consumer came from
  AuthHello hello;
  std::span<const std::uint8_t> channel_binding;
};

// Sessions a provider holds open at once, over all links: each session may
// hold up to MuxConfig::message_budget of partly received messages and its
// windows, so their number bounds the provider's memory. Per address (an IPv4
// address or an IPv6 /64; relayed sessions share the rendezvous' address and
// are counted only in the total) so that one consumer cannot take them all.
struct SessionLimits {
  std::int64_t total = 256;
  std::int64_t per_address = 32;
};

// Live sessions the decision looks at: on the link's grant, from the
// request's address (0 when not counted per address), and in all.
struct LiveSessionCounts {
  std::int64_t on_grant = 0;
  std::int64_t from_address = 0;
  std::int64_t total = 0;
};

struct Admission {
  AuthReply reply;              // what to send back
  bool unproven = false;        // refused before the proof held (went to the `unproven` sink)
  std::optional<Grant> grant;   // when accepted: the grant after counting the use
};

class Admitter {
 public:
  // `live_sessions(grant_id)` counts this provider's open sessions. A proven
  // consumer past `limits` is refused before its use is counted.
  Admitter(GrantStore& grants, AuditLog& audit, const Clock& clock,
           std::function<LiveSessionCounts(const std::string&)> live_sessions, SessionLimits limits = {},
           std::function<void(AuditEvent)> unproven = nullptr)
      : grants_(grants),
        audit_(audit),
        clock_(clock),
        live_sessions_(std::move(live_sessions)),
        limits_(limits),
        unproven_(std::move(unproven)) {}

  Admission admit(const AdmissionRequest& request, const std::string& new_session_id);

 private:
  Admission refuse(const AdmissionRequest& request, errc code, const std::string& reason, bool proven = true);

  GrantStore& grants_;
  AuditLog& audit_;
  const Clock& clock_;
  std::function<LiveSessionCounts(const std::string&)> live_sessions_;
  SessionLimits limits_;
  std::function<void(AuditEvent)> unproven_;
};

}  // namespace runsnack
