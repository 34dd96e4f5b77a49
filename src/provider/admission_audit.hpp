#pragma once
// Audit records of connections refused before the peer proved anything (TLS
// failed or timed out, no or a bad auth message, an unknown link, a wrong
// secret, a connection closed to make room for another), aggregated per
// address, so that a flood of garbage connections writes a few rows, not one
// each (docs/SECURITY.md, "Protocol bounds and rendezvous").
//
// The first such refusal from an address (core/address_key.hpp) in an
// interval is written at once, as it is; the others of that interval become
// one record written when the interval ends (or at flush_all()), with
//   detail {"count": N, "first": RFC 3339, "last": RFC 3339, "reasons": {reason: n, ...}}
// and reason "N more refusals from ADDRESS". At most kMaxTallyAddresses
// addresses are tallied per interval; refusals from further addresses share
// one record with address "(other addresses)". Not thread-safe.

#include "store/audit_log.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

inline constexpr std::size_t kMaxTallyAddresses = 1024;
inline constexpr std::size_t kMaxTallyReasons = 8;
inline constexpr std::size_t kMaxTallyReasonBytes = 160;

class RefusalTally {
 public:
  explicit RefusalTally(std::chrono::seconds interval = std::chrono::seconds(60)) : interval_(interval) {}

  // `ev` is the refusal as it would be written. Returns it when it is to be
  // written now (the address's first in this interval); otherwise counts it.
  std::optional<AuditEvent> note(AuditEvent ev, const std::string& address_key);
  // The aggregate records of an interval that has ended by `now` (all, with
  // `all`), to write; the tally starts a new interval.
  std::vector<AuditEvent> due(TimePoint now, bool all = false);

 private:
  struct Tally {
    AuditEvent sample;  // the first refusal, for kind, grant and peer
    std::int64_t count = 0;
    TimePoint first{}, last{};
    std::map<std::string, std::int64_t> reasons;
  };
  std::chrono::seconds interval_;
  std::optional<TimePoint> started_;
  std::map<std::string, std::optional<Tally>> by_address_;  // nullopt: its first refusal was written, none since
};

}  // namespace runsnack
