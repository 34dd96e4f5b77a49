#include "store/schema.hpp"

namespace runsnack {
namespace {

// STRICT tables: SQLite refuses a value of the wrong type instead of
// silently storing it, which catches mapping mistakes in tests.
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE grants (
  id                    TEXT PRIMARY KEY,
  key                   BLOB NOT NULL CHECK (length(key) = 32),
  created               INTEGER NOT NULL,            -- unix seconds
  expires               INTEGER,                     -- NULL: until revoked
  max_uses              INTEGER,                     -- NULL: unlimited
  uses                  INTEGER NOT NULL DEFAULT 0,
  max_sessions          INTEGER,
  bandwidth_bytes_per_s INTEGER,
  services              TEXT NOT NULL,               -- JSON array of names
  gpus                  TEXT NOT NULL,               -- JSON array of indices; [] all
  bind_first            INTEGER NOT NULL DEFAULT 0,
  bound_peer            TEXT,
  revoked               INTEGER NOT NULL DEFAULT 0,
  label                 TEXT NOT NULL DEFAULT '',
  terms                 TEXT NOT NULL DEFAULT '{}'   -- JSON object: per-service terms
) STRICT;

CREATE TABLE audit (
  seq       INTEGER PRIMARY KEY AUTOINCREMENT,  -- orders events within one second
  time      INTEGER NOT NULL,                   -- unix seconds
  kind      TEXT NOT NULL,
  grant_id  TEXT NOT NULL,
  peer      TEXT NOT NULL,
  address   TEXT NOT NULL,
  decision  TEXT NOT NULL,
  reason    TEXT NOT NULL,
  detail    TEXT NOT NULL                       -- JSON
) STRICT;
CREATE INDEX audit_by_time ON audit (time);
)sql"},
    // Usage budgets of run/shell (services/exec/usage_budget.hpp): CPU and GPU
    // time spent per grant, in microseconds.
    {2, R"sql(
CREATE TABLE usage (
  grant_id  TEXT PRIMARY KEY,
  cpu_us    INTEGER NOT NULL DEFAULT 0,
  gpu_us    INTEGER NOT NULL DEFAULT 0
) STRICT;
)sql"},
    // Live sessions (store/session_store.hpp): what `runsnack links`, `sessions`
    // and `kick` see of the providers serving this database.
    {3, R"sql(
CREATE TABLE sessions (
  id        TEXT PRIMARY KEY,
  grant_id  TEXT NOT NULL,
  peer      TEXT NOT NULL,
  address   TEXT NOT NULL,
  path      TEXT NOT NULL,
  services  TEXT NOT NULL DEFAULT '[]',  -- JSON array of names
  opened    INTEGER NOT NULL,            -- unix seconds
  pid       INTEGER NOT NULL,            -- the provider process
  kicked    INTEGER NOT NULL DEFAULT 0
) STRICT;
)sql"},
    // The commands each live session runs (store/session_store.hpp): what
    // `runsnack sessions` measures. At most kMaxSessionCommands rows per
    // session; further ones are only counted (sessions.unlisted_commands).
    {4, R"sql(
CREATE TABLE session_commands (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id    TEXT NOT NULL,
  command       TEXT NOT NULL,               -- the consumer's command line, cut to kMaxCommandText bytes
  started       INTEGER NOT NULL,            -- unix seconds
  pid           INTEGER NOT NULL,            -- the sandbox's outermost process (bwrap)
  cgroup        TEXT NOT NULL DEFAULT '',    -- its cgroup folder; '' under rlimits
  provider_pid  INTEGER NOT NULL
) STRICT;
CREATE INDEX session_commands_by_session ON session_commands (session_id);
ALTER TABLE sessions ADD COLUMN unlisted_commands INTEGER NOT NULL DEFAULT 0;
)sql"},
    // --max-uses counts consumers, not connections (issue 39; link/grant.hpp):
    // the identities that used each grant (store/grant_store.hpp), and their
    // number beside the grant. What `uses` counted (successful authentications)
    // is kept as `connections`. Existing grants learn their consumers from the
    // audit log's accepted proofs (and their bound peer), so a link the old
    // count had used up keeps working for those who used it.
    {5, R"sql(
CREATE TABLE grant_consumers (
  grant_id    TEXT NOT NULL,
  peer_id     TEXT NOT NULL,
  first_seen  INTEGER NOT NULL,  -- unix seconds
  PRIMARY KEY (grant_id, peer_id)
) STRICT, WITHOUT ROWID;
INSERT INTO grant_consumers (grant_id, peer_id, first_seen)
  SELECT grant_id, peer, MIN(time) FROM audit
  WHERE kind = 'auth' AND decision = 'accept' AND peer <> '' AND grant_id IN (SELECT id FROM grants)
  GROUP BY grant_id, peer;
INSERT OR IGNORE INTO grant_consumers (grant_id, peer_id, first_seen)
  SELECT id, bound_peer, created FROM grants WHERE bound_peer IS NOT NULL;
ALTER TABLE grants RENAME COLUMN uses TO connections;
ALTER TABLE grants ADD COLUMN consumers INTEGER NOT NULL DEFAULT 0;
UPDATE grants SET consumers = (SELECT COUNT(*) FROM grant_consumers WHERE grant_id = grants.id);
)sql"},
};

}  // namespace

std::span<const Migration> store_migrations() { return kMigrations; }

}  // namespace runsnack
