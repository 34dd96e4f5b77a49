// The pool store's schema: one list of migrations per SQL dialect, version
// for version the same tables (PoolStore::open / open_postgres apply them).
#include "pool/pool_store_schema.hpp"

#include <iterator>

namespace runsnack::pool {
namespace {

constexpr Migration kPoolMigrations[] = {
    {1, R"sql(
CREATE TABLE devices (
  id          TEXT PRIMARY KEY,             -- <peer>/<kind>
  peer        TEXT NOT NULL,
  kind        TEXT NOT NULL,                -- "cpu" | "gpu"
  name        TEXT NOT NULL,
  score       INTEGER NOT NULL,             -- calibration ops/s
  price       INTEGER NOT NULL,             -- milli-credits per device-hour
  registered  INTEGER NOT NULL,             -- unix ms
  last_seen   INTEGER NOT NULL,
  online      INTEGER NOT NULL DEFAULT 1
) STRICT;
CREATE TABLE jobs (
  id        TEXT PRIMARY KEY,
  owner     TEXT NOT NULL,
  workload  TEXT NOT NULL,
  spec      TEXT NOT NULL,                  -- JSON
  input     TEXT NOT NULL,                  -- JSON: {"files":[{"path","data"}]}
  shards    INTEGER NOT NULL,
  budget    INTEGER NOT NULL CHECK (budget >= 0),
  state     TEXT NOT NULL CHECK (state IN ('running','done','failed','cancelled')),
  reason    TEXT NOT NULL DEFAULT '',
  created   INTEGER NOT NULL,
  finished  INTEGER
) STRICT;
CREATE TABLE tasks (
  id              TEXT PRIMARY KEY,
  job             TEXT NOT NULL REFERENCES jobs(id),
  shard           INTEGER NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('pending','leased','done','failed')),
  attempts        INTEGER NOT NULL DEFAULT 0,  -- leases given; the live lease is number `attempts`
  device          TEXT,
  worker          TEXT,
  lease_start     INTEGER,
  lease_deadline  INTEGER,
  last_error      TEXT NOT NULL DEFAULT '',
  UNIQUE (job, shard)
) STRICT;
CREATE INDEX tasks_by_state ON tasks (state, job, shard);
CREATE INDEX tasks_by_worker ON tasks (worker, state);
CREATE TABLE results (
  task       TEXT PRIMARY KEY REFERENCES tasks(id),
  worker     TEXT NOT NULL,
  exit_code  INTEGER NOT NULL,
  stdout     BLOB NOT NULL,
  files      TEXT NOT NULL,                 -- JSON
  signature  TEXT NOT NULL,
  received   INTEGER NOT NULL
) STRICT;
CREATE TABLE ledger_txns (
  id    INTEGER PRIMARY KEY AUTOINCREMENT,
  kind  TEXT NOT NULL,
  time  INTEGER NOT NULL
) STRICT;
CREATE TABLE ledger (
  seq      INTEGER PRIMARY KEY AUTOINCREMENT,
  txn      INTEGER NOT NULL REFERENCES ledger_txns(id),
  account  TEXT NOT NULL,
  amount   INTEGER NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('mint','escrow','payment','refund')),
  task     TEXT,
  job      TEXT NOT NULL DEFAULT '',
  CHECK (kind <> 'payment' OR task IS NOT NULL)
) STRICT;
CREATE INDEX ledger_by_account ON ledger (account);
-- a task is paid at most once, whatever retries or duplicate results arrive
CREATE UNIQUE INDEX ledger_one_payment_per_task ON ledger (task) WHERE kind = 'payment' AND amount > 0;
)sql"},
    {2, R"sql(
ALTER TABLE jobs ADD COLUMN info TEXT NOT NULL DEFAULT '{}';      -- JSON the workload shows with the job
ALTER TABLE jobs ADD COLUMN verified INTEGER NOT NULL DEFAULT 0;  -- results checked by computation
ALTER TABLE jobs ADD COLUMN rejected INTEGER NOT NULL DEFAULT 0;  -- of which refused
ALTER TABLE jobs ADD COLUMN verify_us INTEGER NOT NULL DEFAULT 0; -- coordinator time spent checking
ALTER TABLE jobs ADD COLUMN compute_us INTEGER NOT NULL DEFAULT 0;-- workers' compute time of checked results
ALTER TABLE devices ADD COLUMN valid INTEGER NOT NULL DEFAULT 0;     -- results that passed a check
ALTER TABLE devices ADD COLUMN invalid INTEGER NOT NULL DEFAULT 0;   -- results caught wrong
ALTER TABLE devices ADD COLUMN excluded TEXT;                        -- why it gets no more work
CREATE TABLE rejections (                                            -- wrong results, never retried on the same peer
  task    TEXT NOT NULL REFERENCES tasks(id),
  peer    TEXT NOT NULL,
  reason  TEXT NOT NULL,
  time    INTEGER NOT NULL
) STRICT;
CREATE INDEX rejections_by_task ON rejections (task, peer);
)sql"},
    {3, R"sql(
-- Each account's balance, kept in step with the ledger in the same
-- transaction (the ledger stays the record; audit-ledger checks they agree):
-- a balance is one lookup, not a sum over a job's whole history.
CREATE TABLE balances (
  account  TEXT PRIMARY KEY,
  amount   INTEGER NOT NULL
) STRICT;
INSERT INTO balances (account, amount) SELECT account, SUM(amount) FROM ledger GROUP BY account;
-- Claims walk running jobs oldest first.
CREATE INDEX jobs_by_state ON jobs (state, created);
)sql"},
    {4, R"sql(
-- The learned scheduler's state (pool/scheduling/), so a restart keeps what it learned.
CREATE TABLE scheduler_state (
  id     INTEGER PRIMARY KEY CHECK (id = 1),
  state  TEXT NOT NULL
) STRICT;
)sql"},
    {5, R"sql(
-- Nothing here: version 5 narrows PostgreSQL's task indexes to unfinished
-- tasks. SQLite would not use those (it only matches a partial index whose
-- condition the query repeats word for word) and needs no such help.
)sql"},
    {6, R"sql(
-- Extra runs of a shard for a quorum (exec --replicas / --spot-check): a
-- copy is an ordinary task row (shard numbers past the job's shards) that
-- runs shard `of_shard`; the coordinator compares the copies' results.
CREATE TABLE copies (
  task      TEXT PRIMARY KEY REFERENCES tasks(id),
  job       TEXT NOT NULL,
  of_shard  INTEGER NOT NULL
) STRICT;
CREATE INDEX copies_by_shard ON copies (job, of_shard);
)sql"},
    {7, R"sql(
-- Terms fixed when work is handed out (issue 16): a lease records the price
-- and the measured score it was given at; the accepted attempt's terms stay
-- with its result, so audit-ledger checks each payment against them.
ALTER TABLE tasks ADD COLUMN lease_price INTEGER;                   -- milli-credits per device-hour
ALTER TABLE tasks ADD COLUMN lease_score INTEGER;                   -- measured calibration steps/s
ALTER TABLE tasks ADD COLUMN exit_failures INTEGER NOT NULL DEFAULT 0;  -- attempts that exited non-zero
ALTER TABLE results ADD COLUMN lease_price INTEGER;
ALTER TABLE results ADD COLUMN lease_score INTEGER;
ALTER TABLE results ADD COLUMN lease_start INTEGER;
ALTER TABLE jobs ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;         -- runs elsewhere after a non-zero exit
ALTER TABLE jobs ADD COLUMN allow_failures INTEGER NOT NULL DEFAULT 0;  -- failed shards do not fail the job
ALTER TABLE jobs ADD COLUMN unverified INTEGER NOT NULL DEFAULT 0;      -- shards delivered without an independent quorum
-- Attempts whose command exited non-zero: the exit code and stderr's tail, for the submitter.
CREATE TABLE failures (
  task       TEXT NOT NULL REFERENCES tasks(id),
  job        TEXT NOT NULL,
  shard      INTEGER NOT NULL,
  attempt    INTEGER NOT NULL,
  peer       TEXT NOT NULL,
  exit_code  INTEGER NOT NULL,
  stderr     BLOB NOT NULL,
  time       INTEGER NOT NULL
) STRICT;
CREATE INDEX failures_by_job ON failures (job, time);
-- Credits a submit link carries (`pool link --credits N`): granted once, to the first peer that uses it.
CREATE TABLE link_credits (
  grant_id    TEXT PRIMARY KEY,
  amount      INTEGER NOT NULL CHECK (amount > 0),
  claimed_by  TEXT,
  claimed_at  INTEGER
) STRICT;
)sql"},
    {8, R"sql(
-- A device is paid for time once (issue 16): results record the time they
-- were paid for, which never overlaps another of the device's.
ALTER TABLE devices ADD COLUMN paid_until INTEGER NOT NULL DEFAULT 0;  -- end of its last paid result, unix ms
ALTER TABLE results ADD COLUMN paid_from INTEGER;
ALTER TABLE results ADD COLUMN paid_to INTEGER;
)sql"},
    {9, R"sql(
-- What a device must be able to run to take a job's tasks (issue 19: browser
-- devices run only some): the workload's word for the job, e.g. "render" or
-- "matmul-seeded". Jobs from before: '' (native devices only).
ALTER TABLE jobs ADD COLUMN needs TEXT NOT NULL DEFAULT '';
)sql"},
    {10, R"sql(
-- The longest a task may take on a device, as it said at register (issue 19:
-- a phone's tab wants tiles it finishes in seconds). NULL: no cap.
ALTER TABLE devices ADD COLUMN max_task_seconds INTEGER;
)sql"},
    {11, R"sql(
-- A lease that ends without a result is the device's loss, not the task's
-- failure (issue 37): what each device completed and lost sets how many
-- leases it may hold (pool/scheduler.hpp lease_cap) and excludes one that
-- keeps losing them; a task fails only on failures that devices with a
-- record report. The network is the session's /24 or /48 at register.
ALTER TABLE devices ADD COLUMN completed INTEGER NOT NULL DEFAULT 0;  -- results accepted
ALTER TABLE devices ADD COLUMN lost INTEGER NOT NULL DEFAULT 0;       -- leases ended without a result
ALTER TABLE devices ADD COLUMN network TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN worker_failures INTEGER NOT NULL DEFAULT 0;  -- failed as reported by devices with a record
-- Peers the operator vouches for (`pool trust`): a quorum verifies only with
-- one of them or a device with a record of valid checks among its parties.
CREATE TABLE trusted_peers (
  peer   TEXT PRIMARY KEY,
  since  INTEGER NOT NULL
) STRICT;
)sql"},
    {12, R"sql(
-- Training jobs (issue 38): rounds of local training, each round a job of the
-- workload "train-round" (its tasks: one per worker's data shard), averaged by
-- the coordinator (pool/trainer.hpp) into the next round's weights. The
-- weights and the outer optimizer's momentum of the last finished round are
-- kept, so that a restarted coordinator resumes there.
CREATE TABLE trainings (
  id          TEXT PRIMARY KEY,
  owner       TEXT NOT NULL,
  spec        TEXT NOT NULL,                -- JSON (trainer.hpp TrainingSpec)
  input       TEXT NOT NULL,                -- JSON: the script and data shards every round's job reads
  budget      INTEGER NOT NULL CHECK (budget >= 0),
  state       TEXT NOT NULL CHECK (state IN ('running','done','failed','cancelled')),
  reason      TEXT NOT NULL DEFAULT '',
  round       INTEGER NOT NULL DEFAULT 0,   -- rounds finished
  round_job   TEXT,                         -- the running round's job, if any
  weights     TEXT NOT NULL,                -- base64 safetensors: after `round` rounds
  momentum    TEXT NOT NULL DEFAULT '',     -- base64 safetensors, '' before the first step
  metrics     TEXT NOT NULL DEFAULT '[]',   -- JSON: one object per finished round
  spent       INTEGER NOT NULL DEFAULT 0,   -- micro-credits the finished rounds' jobs spent
  created     INTEGER NOT NULL,
  finished    INTEGER
) STRICT;
CREATE INDEX trainings_by_state ON trainings (state);
)sql"},
    {13, R"sql(
-- A training's files by content, per owner, in chunks of at most 4 MiB
-- (pool/training_data.hpp): data past one message is uploaded a chunk at a
-- time, and workers read their shard's files a chunk at a time. A training
-- waits for its files (awaiting_data) before its first round.
ALTER TABLE trainings ADD COLUMN awaiting_data INTEGER NOT NULL DEFAULT 0;
CREATE TABLE training_blobs (
  owner     TEXT NOT NULL,
  sha256    TEXT NOT NULL,
  size      INTEGER NOT NULL CHECK (size >= 0),
  stored    INTEGER NOT NULL DEFAULT 0,    -- bytes uploaded so far, in order
  complete  INTEGER NOT NULL DEFAULT 0,    -- 1: all of it, checked against sha256
  PRIMARY KEY (owner, sha256)
) STRICT;
CREATE TABLE training_chunks (
  owner     TEXT NOT NULL,
  sha256    TEXT NOT NULL,
  chunk     INTEGER NOT NULL,              -- bytes [chunk * 4 MiB, ...)
  bytes     BLOB NOT NULL,
  PRIMARY KEY (owner, sha256, chunk)
) STRICT;
)sql"},
};

// The same schema, version for version, in PostgreSQL types.
constexpr Migration kPoolMigrationsPostgres[] = {
    {1, R"sql(
CREATE TABLE devices (
  id          TEXT PRIMARY KEY,
  peer        TEXT NOT NULL,
  kind        TEXT NOT NULL,
  name        TEXT NOT NULL,
  score       BIGINT NOT NULL,
  price       BIGINT NOT NULL,
  registered  BIGINT NOT NULL,
  last_seen   BIGINT NOT NULL,
  online      BIGINT NOT NULL DEFAULT 1
);
CREATE TABLE jobs (
  id        TEXT PRIMARY KEY,
  owner     TEXT NOT NULL,
  workload  TEXT NOT NULL,
  spec      TEXT NOT NULL,
  input     TEXT NOT NULL,
  shards    BIGINT NOT NULL,
  budget    BIGINT NOT NULL CHECK (budget >= 0),
  state     TEXT NOT NULL CHECK (state IN ('running','done','failed','cancelled')),
  reason    TEXT NOT NULL DEFAULT '',
  created   BIGINT NOT NULL,
  finished  BIGINT
);
CREATE TABLE tasks (
  id              TEXT PRIMARY KEY,
  job             TEXT NOT NULL REFERENCES jobs(id),
  shard           BIGINT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('pending','leased','done','failed')),
  attempts        BIGINT NOT NULL DEFAULT 0,
  device          TEXT,
  worker          TEXT,
  lease_start     BIGINT,
  lease_deadline  BIGINT,
  last_error      TEXT NOT NULL DEFAULT '',
  UNIQUE (job, shard)
);
CREATE INDEX tasks_by_state ON tasks (state, job, shard);
CREATE INDEX tasks_by_worker ON tasks (worker, state);
CREATE TABLE results (
  task       TEXT PRIMARY KEY REFERENCES tasks(id),
  worker     TEXT NOT NULL,
  exit_code  BIGINT NOT NULL,
  stdout     BYTEA NOT NULL,
  files      TEXT NOT NULL,
  signature  TEXT NOT NULL,
  received   BIGINT NOT NULL
);
CREATE TABLE ledger_txns (
  id    BIGSERIAL PRIMARY KEY,
  kind  TEXT NOT NULL,
  time  BIGINT NOT NULL
);
CREATE TABLE ledger (
  seq      BIGSERIAL PRIMARY KEY,
  txn      BIGINT NOT NULL REFERENCES ledger_txns(id),
  account  TEXT NOT NULL,
  amount   BIGINT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('mint','escrow','payment','refund')),
  task     TEXT,
  job      TEXT NOT NULL DEFAULT '',
  CHECK (kind <> 'payment' OR task IS NOT NULL)
);
CREATE INDEX ledger_by_account ON ledger (account);
CREATE UNIQUE INDEX ledger_one_payment_per_task ON ledger (task) WHERE kind = 'payment' AND amount > 0;
)sql"},
    {2, R"sql(
ALTER TABLE jobs ADD COLUMN info TEXT NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN verified BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN rejected BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN verify_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN compute_us BIGINT NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN valid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN invalid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN excluded TEXT;
CREATE TABLE rejections (
  task    TEXT NOT NULL REFERENCES tasks(id),
  peer    TEXT NOT NULL,
  reason  TEXT NOT NULL,
  time    BIGINT NOT NULL
);
CREATE INDEX rejections_by_task ON rejections (task, peer);
)sql"},
    {3, R"sql(
CREATE TABLE balances (
  account  TEXT PRIMARY KEY,
  amount   BIGINT NOT NULL
);
INSERT INTO balances (account, amount) SELECT account, SUM(amount) FROM ledger GROUP BY account;
CREATE INDEX jobs_by_state ON jobs (state, created);
)sql"},
    {4, R"sql(
CREATE TABLE scheduler_state (
  id     BIGINT PRIMARY KEY CHECK (id = 1),
  state  TEXT NOT NULL
);
)sql"},
    {5, R"sql(
-- Finished tasks leave the state and worker indexes: a task's last update
-- (leased to done) then writes two index entries instead of four. Every
-- query that used them names an unfinished state ('pending', 'leased',
-- 'failed'), which implies these conditions.
DROP INDEX tasks_by_state;
CREATE INDEX tasks_unfinished ON tasks (state, job, shard) WHERE state <> 'done';
DROP INDEX tasks_by_worker;
CREATE INDEX tasks_leased_by_worker ON tasks (worker) WHERE state = 'leased';
)sql"},
    {6, R"sql(
CREATE TABLE copies (
  task      TEXT PRIMARY KEY REFERENCES tasks(id),
  job       TEXT NOT NULL,
  of_shard  BIGINT NOT NULL
);
CREATE INDEX copies_by_shard ON copies (job, of_shard);
)sql"},
    {7, R"sql(
ALTER TABLE tasks ADD COLUMN lease_price BIGINT;
ALTER TABLE tasks ADD COLUMN lease_score BIGINT;
ALTER TABLE tasks ADD COLUMN exit_failures BIGINT NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN lease_price BIGINT;
ALTER TABLE results ADD COLUMN lease_score BIGINT;
ALTER TABLE results ADD COLUMN lease_start BIGINT;
ALTER TABLE jobs ADD COLUMN retries BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN allow_failures BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN unverified BIGINT NOT NULL DEFAULT 0;
CREATE TABLE failures (
  task       TEXT NOT NULL REFERENCES tasks(id),
  job        TEXT NOT NULL,
  shard      BIGINT NOT NULL,
  attempt    BIGINT NOT NULL,
  peer       TEXT NOT NULL,
  exit_code  BIGINT NOT NULL,
  stderr     BYTEA NOT NULL,
  time       BIGINT NOT NULL
);
CREATE INDEX failures_by_job ON failures (job, time);
CREATE TABLE link_credits (
  grant_id    TEXT PRIMARY KEY,
  amount      BIGINT NOT NULL CHECK (amount > 0),
  claimed_by  TEXT,
  claimed_at  BIGINT
);
)sql"},
    {8, R"sql(
ALTER TABLE devices ADD COLUMN paid_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE results ADD COLUMN paid_from BIGINT;
ALTER TABLE results ADD COLUMN paid_to BIGINT;
)sql"},
    {9, R"sql(
ALTER TABLE jobs ADD COLUMN needs TEXT NOT NULL DEFAULT '';
)sql"},
    {10, R"sql(
ALTER TABLE devices ADD COLUMN max_task_seconds BIGINT;
)sql"},
    {11, R"sql(
ALTER TABLE devices ADD COLUMN completed BIGINT NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN lost BIGINT NOT NULL DEFAULT 0;
ALTER TABLE devices ADD COLUMN network TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN worker_failures BIGINT NOT NULL DEFAULT 0;
CREATE TABLE trusted_peers (
  peer   TEXT PRIMARY KEY,
  since  BIGINT NOT NULL
);
)sql"},
    {12, R"sql(
CREATE TABLE trainings (
  id          TEXT PRIMARY KEY,
  owner       TEXT NOT NULL,
  spec        TEXT NOT NULL,
  input       TEXT NOT NULL,
  budget      BIGINT NOT NULL CHECK (budget >= 0),
  state       TEXT NOT NULL CHECK (state IN ('running','done','failed','cancelled')),
  reason      TEXT NOT NULL DEFAULT '',
  round       BIGINT NOT NULL DEFAULT 0,
  round_job   TEXT,
  weights     TEXT NOT NULL,
  momentum    TEXT NOT NULL DEFAULT '',
  metrics     TEXT NOT NULL DEFAULT '[]',
  spent       BIGINT NOT NULL DEFAULT 0,
  created     BIGINT NOT NULL,
  finished    BIGINT
);
CREATE INDEX trainings_by_state ON trainings (state);
)sql"},
    {13, R"sql(
ALTER TABLE trainings ADD COLUMN awaiting_data BIGINT NOT NULL DEFAULT 0;
CREATE TABLE training_blobs (
  owner     TEXT NOT NULL,
  sha256    TEXT NOT NULL,
  size      BIGINT NOT NULL CHECK (size >= 0),
  stored    BIGINT NOT NULL DEFAULT 0,
  complete  BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (owner, sha256)
);
CREATE TABLE training_chunks (
  owner     TEXT NOT NULL,
  sha256    TEXT NOT NULL,
  chunk     BIGINT NOT NULL,
  bytes     BYTEA NOT NULL,
  PRIMARY KEY (owner, sha256, chunk)
);
)sql"},
};

static_assert(std::size(kPoolMigrations) == std::size(kPoolMigrationsPostgres), "one schema, two dialects");

}  // namespace

std::span<const Migration> pool_migrations_sqlite() { return kPoolMigrations; }
std::span<const Migration> pool_migrations_postgres() { return kPoolMigrationsPostgres; }

}  // namespace runsnack::pool
