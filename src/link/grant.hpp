#pragma once
// A Grant is what one link allows (docs/ARCHITECTURE.md section 3). The provider
// stores it (store/GrantStore); the secret itself is never stored, only the
// key derived from it, against which consumers prove possession.
//
// check_grant() and check_new_consumer() are the whole admission policy, as
// pure functions of the grant, the time and the live-session count, so they
// are tested without I/O.
//
// --max-uses counts consumers (issue 39): the identities (PeerIds) that have
// proven the secret. The first max_uses of them may use the link as often as
// they like until it expires or is revoked; one more is refused. Connections
// are counted too (`connections`), limited by nothing.

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

// --max-uses: 1 to this. Bounded so that what a link can make the provider
// keep (a row per consumer) is bounded, and so that the number fits where
// `links` prints it; a million people is more than any link is for.
inline constexpr std::int64_t kMaxUsesLimit = 1'000'000;

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
  std::optional<std::int64_t> max_uses;    // consumers (identities) allowed, each as often as it likes
  std::int64_t consumers = 0;              // identities that have used it (at most kMaxUsesLimit are counted)
  std::int64_t connections = 0;            // successful authentications, all consumers together
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

// Whether `consumer` may open a new session now: not revoked, not expired,
// max_sessions, binding. Whether it may be one of the grant's consumers is
// check_new_consumer()'s question, asked only of one the grant has not seen
// (GrantStore::record_use() decides which, atomically). Does not count the
// use; the caller records it once the proof has been verified.
GrantDecision check_grant(const Grant& grant, TimePoint now, std::int64_t live_sessions,
                          const std::string& consumer_peer);

// Whether a consumer the grant has not seen yet may become one: refused, with
// what to do next, once `max_uses` consumers have used it.
GrantDecision check_new_consumer(const Grant& grant);

// Consumers the grant still takes, or none when it takes any number.
std::optional<std::int64_t> uses_left(const Grant& grant);

// Whether a live session on this grant must end now (revoked or expired).
std::optional<GrantDecision> check_live_session(const Grant& grant, TimePoint now);

bool grant_allows_service(const Grant& grant, const std::string& service);

// The grant's public terms (never the key), as `runsnack links` and the info
// service show them: id, label, created, expires (RFC 3339 or null),
// max_uses, uses (consumers so far: what max_uses counts), uses_left (null
// when unlimited), connections, max_sessions, bandwidth_bytes_per_s,
// services, gpus, bind_first, bound_peer, revoked, terms, state
// ("active"|"full"|"expired"|"revoked"; "full": its consumers may still use
// it, nobody else).
nlohmann::json grant_terms(const Grant& grant, TimePoint now);

}  // namespace runsnack
