#pragma once
// The provider's audit log: every admission decision (accepted or refused,
// with the reason), session open/close, service use and revocation, in the
// `audit` table of a store Database (opened with Database::open()).
//
// Peer-provided text is bounded before it is stored: string fields are cut
// to kAuditFieldMaxBytes (reason: kAuditReasonMaxBytes) and made valid UTF-8
// (see bounded_text()); a `detail` whose JSON is longer than
// kAuditDetailMaxBytes is replaced by {"truncated": true, "bytes": N}.
// So one hostile peer cannot grow a row without bound, and reading the log
// back never fails on bad bytes.
//
// Retention: prune() deletes by age and keeps at most a number of rows; the
// provider applies its defaults at start and hourly (provider/provider.hpp),
// `runsnack log --prune` others.
//
// Ownership and threads: borrows its Database (which must outlive it) and
// inherits its rule: one thread at a time. Any number of processes may
// append to the same file.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "store/database.hpp"

namespace runsnack {

inline constexpr std::size_t kAuditFieldMaxBytes = 256;
inline constexpr std::size_t kAuditReasonMaxBytes = 1024;
inline constexpr std::size_t kAuditDetailMaxBytes = 4096;

struct AuditEvent {
  TimePoint time{};  // stored to the second
  std::string kind;  // "connect", "session_open", "session_close", "refused", "service", "revoke", ...
  std::string grant_id;
  std::string peer;      // the consumer's PeerId, when known
  std::string address;   // the remote address, e.g. "203.0.113.7:41234"
  std::string decision;  // "accept" | "refuse" | ""
  std::string reason;
  nlohmann::json detail;  // anything else worth keeping; null when none
};

// {"time": RFC 3339, "kind", "grant_id", "peer", "address", "decision", "reason", "detail"}
nlohmann::json to_json(const AuditEvent& e);
// The same, as nlohmann's ADL hook: `nlohmann::json j = event;`.
void to_json(nlohmann::json& j, const AuditEvent& e);

class AuditLog {
 public:
  explicit AuditLog(Database& db) : db_(db) {}

  Result<void> append(const AuditEvent& event);
  // All of `events`, in order, in one transaction (one commit, one prepared
  // statement): all are written or none.
  Result<void> append(std::span<const AuditEvent> events);

  // The latest `limit` events at or after `since` (all times when none), in
  // the order they were appended (oldest first).
  Result<std::vector<AuditEvent>> query(std::optional<TimePoint> since, std::size_t limit);

  // Deletes the events before `older_than` (when given), then all but the
  // newest `keep_rows` (when given); returns how many were deleted.
  Result<std::int64_t> prune(std::optional<TimePoint> older_than, std::optional<std::int64_t> keep_rows);
  Result<std::int64_t> count();

 private:
  Database& db_;
};

}  // namespace runsnack
