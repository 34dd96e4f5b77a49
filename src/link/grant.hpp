#pragma once
// A Grant is what one link allows (docs/ARCHITECTURE.md section 3). The provider
// stores it (store/GrantStore); the secret itself is never stored, only the
// key derived from it, against which consumers prove possession.
//
// check_grant() is the whole admission policy, as a pure function of the
// grant, the time and the live-session count, so it is tested without I/O.

#include "core/clock.hpp"
#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace runsnack {

// Services a grant can allow. Every grant allows "info"; `share --allow` adds others.
inline constexpr const char* kServiceInfo = "info";
inline constexpr const char* kKnownServices[] = {"info", "run", "shell", "cp", "forward", "cuda"};

// "run,shell" -> {"info","run","shell"}; an unknown name is an error listing the known ones.
Result<std::set<std::string>> parse_service_list(std::string_view list);

struct Grant {
  std::string id;                          // 10 base32 characters, public (travels to a rendezvous)
  std::array<std::uint8_t, 32> key{};      // HKDF-SHA256 of the link secret
  TimePoint created{};
  std::optional<TimePoint> expires;        // none: until revoked
  std::optional<std::int64_t> max_uses;    // successful authentications allowed
  std::int64_t uses = 0;
  std::optional<std::int64_t> max_sessions;  // concurrent sessions
  std::optional<std::int64_t> bandwidth_bytes_per_s;
  std::set<std::string> services{kServiceInfo};
  std::vector<int> gpus;                   // shared GPU indices; empty: all
  bool bind_first = false;                 // the first consumer's PeerId becomes the only one allowed
  std::optional<std::string> bound_peer;   // set at first use when bind_first
  bool revoked = false;
  std::string label;                       // free text shown by `runsnack links`
  // Per-service terms, keyed by service name (e.g. "forward": {"targets": [...]}),
  // so that a service adds what its grants say without a schema change.
  nlohmann::json terms = nlohmann::json::object();
};

struct GrantDecision {
  bool accepted = false;
  errc code = errc::ok;     // why not, as a code
  std::string reason;       // why not, for the audit log and the consumer
};

// Whether `consumer` may open a new session now. Does not count the use;
// the caller records it once the proof has been verified.
GrantDecision check_grant(const Grant& grant, TimePoint now, std::int64_t live_sessions,
                          const std::string& consumer_peer);

// Whether a live session on this grant must end now (revoked or expired).
std::optional<GrantDecision> check_live_session(const Grant& grant, TimePoint now);

bool grant_allows_service(const Grant& grant, const std::string& service);

// The grant's public terms (never the key), as `runsnack links` and the info
// service show them: id, label, created, expires (RFC 3339 or null),
// max_uses, uses, max_sessions, bandwidth_bytes_per_s, services, gpus,
// bind_first, bound_peer, revoked, terms, state ("active"|"expired"|"used up"|"revoked").
nlohmann::json grant_terms(const Grant& grant, TimePoint now);

}  // namespace runsnack
