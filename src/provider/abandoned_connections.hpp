#pragma once
// Connections whose peer closed them before sending its auth message (EOF or
// reset during the TLS handshake, or after it with not one byte of the
// message): what a consumer's dial race leaves behind, since it dials every
// address of a link and closes the ones that lose (net/dial_race.hpp). They
// are not refusals: nothing was refused. They are counted per address and
// written as one audit record per address and interval, decision "abandon",
//   detail {"count": N, "first": RFC 3339, "last": RFC 3339}
// so that a scan that only opens and closes connections stays visible without
// a row each. Bounded like RefusalTally (kMaxTallyAddresses addresses, the
// rest as "(other addresses)"). Not thread-safe.

#include "store/audit_log.hpp"

#include <boost/system/error_code.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack {

// Whether a TLS handshake or read failed because the peer went away (EOF,
// truncated TLS stream, reset), not because of what it sent.
bool closed_by_peer(const boost::system::error_code& ec);

class AbandonTally {
 public:
  explicit AbandonTally(std::chrono::seconds interval = std::chrono::seconds(60)) : interval_(interval) {}

  // `address` is the connection's host:port; `address_key` the address it counts under.
  void note(TimePoint when, const std::string& address_key, const std::string& path);
  // The records of an interval that has ended by `now` (all, with `all`); a new interval starts.
  std::vector<AuditEvent> due(TimePoint now, bool all = false);

 private:
  struct Tally {
    std::int64_t count = 0;
    TimePoint first{}, last{};
    std::string path;  // of the first: direct, punched, relayed
  };
  std::chrono::seconds interval_;
  std::optional<TimePoint> started_;
  std::map<std::string, Tally> by_address_;
};

}  // namespace runsnack
