#pragma once
// The provider's grants, one row per link (docs/ARCHITECTURE.md section 3), in the
// `grants` table of a store Database (opened with Database::open()), and the
// consumers of each in `grant_consumers` (grant_id, peer_id, first_seen): the
// identities --max-uses counts (link/grant.hpp).
//
// Row mapping: times are unix seconds, "none" optionals are NULL, the key is a
// 32-byte BLOB, services and gpus are JSON arrays; grants.consumers is the
// number of the grant's grant_consumers rows, kept with them.
//
// Ownership and threads: a GrantStore borrows its Database (which must
// outlive it) and inherits its threading rule: one thread at a time. Several
// processes may each hold a GrantStore on the same file; record_use() is the
// one read-modify-write and runs in one write transaction, so it is atomic
// across them.
//
// Failures: SQLite errors as Result errors (timeout when another process
// holds the write lock past the busy timeout); a row that does not decode
// (bad JSON, wrong key length) is `malformed`.

#include <optional>
#include <string_view>
#include <vector>

#include "core/clock.hpp"
#include "core/error.hpp"
#include "link/grant.hpp"
#include "store/database.hpp"

namespace runsnack {

class GrantStore {
 public:
  // `clock` decides what list() considers expired; it must outlive the store.
  explicit GrantStore(Database& db, const Clock& clock = SystemClock::instance()) : db_(db), clock_(clock) {}

  // Inserts a new grant; `invalid_argument` when the id exists already.
  Result<void> create(const Grant& grant);

  Result<std::optional<Grant>> find(std::string_view id);

  // All grants, oldest first. Without `include_dead`, leaves out those
  // revoked or expired (by the clock); a full one is live (its consumers
  // may come back).
  Result<std::vector<Grant>> list(bool include_dead);

  // true: the grant is revoked (now, or it was already: revoking is
  // idempotent); false: there is no such grant. Live sessions notice
  // through check_live_session().
  Result<bool> revoke(std::string_view id);

  // Counts one successful authentication by `consumer_peer` at `now`, if the
  // grant still allows it: not revoked, not expired, bound_peer (when set)
  // equal to `consumer_peer`, and `consumer_peer` one of its consumers already
  // or, while fewer than max_uses (when set) have used it, made one (recorded
  // with `now` as first_seen; past kMaxUsesLimit consumers of a grant without
  // max_uses, admitted without being recorded). With bind_first and no bound
  // peer yet, binds `consumer_peer`. All in one write transaction, so two
  // processes admitting new consumers for the last place cannot both win.
  // false: the grant no longer allows it (it is full, lost a race, or is
  // unknown) -- refuse the session. Does not check max_sessions (live state,
  // not stored).
  Result<bool> record_use(std::string_view id, std::string_view consumer_peer, TimePoint now);

 private:
  Database& db_;
  const Clock& clock_;
};

}  // namespace runsnack
