#include "pool/pool_store.hpp"

#include "link/link.hpp"
#include "pool/scheduler.hpp"
#include "store/migrate.hpp"

#include <iterator>

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <array>
#include <map>
#include <utility>

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
};

std::string hex(std::span<const std::uint8_t> bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) out += d[b >> 4], out += d[b & 15];
  return out;
}

std::string sha256_hex(std::string_view data) {
  std::array<std::uint8_t, 32> md{};
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
  return hex(md);
}

std::string new_id(const char* prefix) { return std::string(prefix) + new_grant_id(); }

// Cache bounds (PoolStore's caches of facts that never change).
constexpr std::size_t kMaxCachedRefs = 8192, kMaxCachedJobs = 256;

// No work without pay: a job `j` whose tasks the device (an SQL parameter)
// may take: any job for a free device (price 0), for a priced one only a job
// whose escrow holds credit (a job without a budget goes to free devices only).
std::string payable_by_device(const std::string& device_param) {
  return "(COALESCE((SELECT d.price FROM devices d WHERE d.id = " + device_param + "), 0) = 0 OR "
         "COALESCE((SELECT b.amount FROM balances b WHERE b.account = 'escrow:' || j.id), 0) > 0)";
}

// "?F, ?F+1, ..." : n numbered parameters from F (SQLite and PostgreSQL alike).
std::string param_list(std::size_t n, std::size_t first = 1) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += '?';
    out += std::to_string(first + i);
  }
  return out;
}

// "(?1, ?2), (?3, ?4), ..." : `rows` rows of `cols` numbered parameters.
std::string value_rows(std::size_t rows, std::size_t cols) {
  std::string out;
  for (std::size_t r = 0; r < rows; ++r) {
    if (r) out += ", ";
    out += '(' + param_list(cols, 1 + r * cols) + ')';
  }
  return out;
}

}  // namespace

std::vector<std::uint8_t> result_signing_bytes(const std::string& task, std::int64_t attempt, const TaskResult& r) {
  // v2 when files travel as binary frames: the files list names them by
  // index, and each frame's own hash follows.
  std::string text = r.frames.empty() ? "runsnack-pool-result-v1\n" : "runsnack-pool-result-v2\n";
  text += task + "\n" + std::to_string(attempt) + "\n" + std::to_string(r.exit_code) + "\n" + sha256_hex(r.stdout_data) + "\n" +
          sha256_hex(r.files.dump());
  for (const auto& f : r.frames) text.append(1, '\n').append(sha256_hex(f));
  if (!r.stderr_tail.empty()) text += "\nstderr " + sha256_hex(r.stderr_tail);  // only failed runs carry one
  return {text.begin(), text.end()};
}

Result<PoolStore> PoolStore::open(const std::filesystem::path& path, PoolPolicy policy) {
  auto db = SqlDb::open_sqlite(path, kPoolMigrations);
  if (!db) return db.error();
  return PoolStore(std::move(*db), policy);
}

Result<PoolStore> PoolStore::open_postgres(const std::string& url, PoolPolicy policy) {
  static_assert(std::size(kPoolMigrations) == std::size(kPoolMigrationsPostgres), "one schema, two dialects");
  auto db = SqlDb::open_postgres(url, kPoolMigrationsPostgres);
  if (!db) return db.error();
  return PoolStore(std::move(*db), policy);
}

Result<std::int64_t> PoolStore::new_txn(const std::string& kind, std::int64_t now_ms) {
  auto st = db_.prepare("INSERT INTO ledger_txns (kind, time) VALUES (?, ?) RETURNING id");
  if (!st) return st.error();
  auto row = st->bind(1, std::string_view(kind)).bind(2, now_ms).step();
  if (!row) return row.error();
  if (!*row) return fail(errc::internal, "no ledger transaction id");
  std::int64_t id = st->column_int64(0);
  if (auto more = st->run(); !more) return more.error();
  return id;
}

Result<void> PoolStore::entry(std::int64_t txn, const std::string& account, Micro amount, const std::string& kind,
                              const std::optional<std::string>& task, const std::string& job) {
  auto st = db_.prepare("INSERT INTO ledger (txn, account, amount, kind, task, job) VALUES (?, ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  if (auto r = st->bind(1, txn).bind(2, std::string_view(account)).bind(3, amount).bind(4, std::string_view(kind)).bind(5, task).bind(6, std::string_view(job)).run(); !r)
    return r;
  auto bal = db_.prepare(
      "INSERT INTO balances (account, amount) VALUES (?1, ?2) "
      "ON CONFLICT (account) DO UPDATE SET amount = balances.amount + ?2");
  if (!bal) return bal.error();
  return bal->bind(1, std::string_view(account)).bind(2, amount).run();
}

Result<Micro> PoolStore::balance(const std::string& account) {
  auto st = db_.prepare("SELECT COALESCE((SELECT amount FROM balances WHERE account = ?), 0)");
  if (!st) return st.error();
  st->bind(1, std::string_view(account));
  auto row = st->step();
  if (!row) return row.error();
  return st->column_int64(0);
}

Result<std::vector<LedgerEntry>> PoolStore::entries_for(const std::string& account) {
  auto st = db_.prepare("SELECT txn, account, amount, kind, task FROM ledger WHERE account = ? ORDER BY seq");
  if (!st) return st.error();
  st->bind(1, std::string_view(account));
  std::vector<LedgerEntry> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back({st->column_int64(0), st->column_text(1), st->column_int64(2), st->column_text(3),
                   st->column_optional_text(4)});
  }
  return out;
}

Result<std::string> PoolStore::register_device(const std::string& peer, const std::string& kind,
                                               const std::string& name, double price, std::int64_t now_ms) {
  std::string id = peer + "/" + kind;
  auto st = db_.prepare(
      "INSERT INTO devices (id, peer, kind, name, score, price, registered, last_seen, online) "
      "VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?6, 1) ON CONFLICT (id) DO UPDATE SET name = ?4, score = 0, "
      "price = ?5, last_seen = ?6, online = 1");
  // The score is the coordinator's measurement (set_device_score), never the
  // worker's word: none until it is measured. Leases already held keep the
  // terms they were given at (tasks.lease_price / lease_score).
  if (!st) return st.error();
  // Statement binds integers only: the price in milli-credits per hour (read
  // back the same way in devices()/complete()).
  st->bind(1, std::string_view(id)).bind(2, std::string_view(peer)).bind(3, std::string_view(kind)).bind(4, std::string_view(name));
  st->bind(5, static_cast<std::int64_t>(price * 1000)).bind(6, now_ms);
  if (auto r = st->run(); !r) return r.error();
  return id;
}

Result<void> PoolStore::set_device_online(const std::string& peer, bool online) {
  auto st = db_.prepare("UPDATE devices SET online = ? WHERE peer = ?");
  if (!st) return st.error();
  return st->bind(1, std::int64_t{online}).bind(2, std::string_view(peer)).run();
}

Result<void> PoolStore::save_scheduler_state(const nlohmann::json& state) {
  auto st = db_.prepare(
      "INSERT INTO scheduler_state (id, state) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET state = ?1");
  if (!st) return st.error();
  return st->bind(1, std::string_view(state.dump())).run();
}

Result<std::optional<nlohmann::json>> PoolStore::scheduler_state() {
  auto st = db_.prepare("SELECT state FROM scheduler_state WHERE id = 1");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<nlohmann::json>{};
  auto j = nlohmann::json::parse(st->column_text(0), nullptr, false);
  if (j.is_discarded()) return std::optional<nlohmann::json>{};
  return std::optional<nlohmann::json>(std::move(j));
}

Result<double> PoolStore::device_score(const std::string& device) {
  auto st = db_.prepare("SELECT CAST(score AS BIGINT) FROM devices WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(device));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no device " + device);
  return static_cast<double>(st->column_int64(0));
}

Result<std::vector<DeviceInfo>> PoolStore::devices() {
  auto st = db_.prepare(
      "SELECT d.id, d.peer, d.kind, d.name, CAST(d.score AS BIGINT), CAST(d.price AS BIGINT), d.online, "
      "(SELECT COUNT(*) FROM tasks t WHERE t.device = d.id AND t.state = 'done'), d.valid, d.invalid, d.excluded "
      "FROM devices d ORDER BY d.score DESC");
  if (!st) return st.error();
  std::vector<DeviceInfo> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    DeviceInfo d;
    d.id = st->column_text(0), d.peer = st->column_text(1), d.kind = st->column_text(2), d.name = st->column_text(3);
    d.score = static_cast<double>(st->column_int64(4));
    d.price = static_cast<double>(st->column_int64(5)) / 1000.0;
    d.online = st->column_int64(6) != 0;
    d.tasks_done = st->column_int64(7);
    d.valid = st->column_int64(8), d.invalid = st->column_int64(9);
    d.excluded = st->column_optional_text(10);
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::string> PoolStore::create_job(const std::string& owner, const std::string& workload,
                                          const nlohmann::json& spec, const nlohmann::json& input,
                                          const nlohmann::json& info, std::int64_t shards, Micro budget,
                                          std::int64_t now_ms, const JobRules& rules) {
  if (shards <= 0) return fail(errc::invalid_argument, "a job needs at least one shard");
  if (budget < 0) return fail(errc::invalid_argument, "a negative budget");
  if (rules.retries < 0 || rules.retries > 100) return fail(errc::invalid_argument, "retries must be 0..100");
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto have = balance(peer_account(owner));
  if (!have) return have.error();
  if (*have < budget)
    return fail(errc::refused, "not enough credit: balance " + format_credits(*have) + ", budget " +
                                   format_credits(budget));
  std::string job = new_id("j");
  auto st = db_.prepare(
      "INSERT INTO jobs (id, owner, workload, spec, input, shards, budget, state, created, info, retries, allow_failures) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)");
  if (!st) return st.error();
  st->bind(1, std::string_view(job)).bind(2, std::string_view(owner)).bind(3, std::string_view(workload)).bind(4, std::string_view(spec.dump())).bind(5, std::string_view(input.dump()));
  st->bind(6, shards).bind(7, budget).bind(8, now_ms).bind(9, std::string_view(info.is_object() ? info.dump() : "{}"));
  if (auto r = st->bind(10, std::int64_t{rules.retries}).bind(11, std::int64_t{rules.allow_failures}).run(); !r)
    return r.error();
  // Every task in one statement (not a round trip per shard): ids "<job>.<shard>".
  auto ins = db_.prepare(
      "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?2) "
      "INSERT INTO tasks (id, job, shard, state) SELECT ?1 || '.' || CAST(i AS TEXT), ?1, i, 'pending' FROM s");
  if (!ins) return ins.error();
  if (auto r = ins->bind(1, std::string_view(job)).bind(2, shards).run(); !r) return r.error();
  if (budget > 0) {
    auto txn = new_txn("escrow", now_ms);
    if (!txn) return txn.error();
    if (auto r = entry(*txn, peer_account(owner), -budget, "escrow", std::nullopt, job); !r) return r.error();
    if (auto r = entry(*txn, escrow_account(job), budget, "escrow", std::nullopt, job); !r) return r.error();
  }
  if (auto r = tx->commit(); !r) return r.error();
  return job;
}

Result<nlohmann::json> PoolStore::job_input(const std::string& job) {
  auto st = db_.prepare("SELECT input FROM jobs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no job " + job);
  return nlohmann::json::parse(st->column_text(0), nullptr, false);
}

Result<std::int64_t> PoolStore::pending_count(std::int64_t at_most) {
  auto st = db_.prepare(
      "SELECT COUNT(*) FROM (SELECT 1 FROM jobs j JOIN tasks t ON t.job = j.id AND t.state = 'pending' "
      "WHERE j.state = 'running' LIMIT ?) AS x");
  if (!st) return st.error();
  st->bind(1, at_most);
  auto row = st->step();
  if (!row) return row.error();
  return st->column_int64(0);
}

Result<std::vector<PoolStore::PendingJobRow>> PoolStore::pending_jobs(std::int64_t limit, std::int64_t count_limit,
                                                                     const std::string& peer, const std::string& device) {
  auto st = db_.prepare(
      "SELECT j.id, j.workload, j.info, (SELECT COUNT(*) FROM (SELECT 1 FROM tasks t WHERE t.state = 'pending' "
      "AND t.job = j.id AND NOT EXISTS (SELECT 1 FROM rejections x WHERE x.task = t.id AND x.peer = ?3) "
      "LIMIT ?2) AS x) FROM jobs j WHERE j.state = 'running' AND " + payable_by_device("?4") + " AND EXISTS "
      "(SELECT 1 FROM tasks t WHERE t.state = 'pending' AND t.job = j.id AND NOT EXISTS (SELECT 1 FROM rejections x "
      "WHERE x.task = t.id AND x.peer = ?3)) ORDER BY j.created LIMIT ?1");
  if (!st) return st.error();
  st->bind(1, limit).bind(2, count_limit).bind(3, std::string_view(peer)).bind(4, std::string_view(device));
  std::vector<PendingJobRow> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back({st->column_text(0), st->column_text(1), st->column_int64(3),
                   nlohmann::json::parse(st->column_text(2), nullptr, false)});
  }
  return out;
}

Result<std::optional<LeasedTask>> PoolStore::claim(const std::string& device, const std::string& peer,
                                                   std::int64_t now_ms, const std::optional<std::string>& only_job) {
  auto tasks = claim_many(device, peer, now_ms, 1, only_job);
  if (!tasks) return tasks.error();
  if (tasks->empty()) return std::optional<LeasedTask>{};
  return std::optional<LeasedTask>(std::move(tasks->front()));
}

Result<std::vector<LeasedTask>> PoolStore::claim_many(const std::string& device, const std::string& peer,
                                                      std::int64_t now_ms, std::int64_t max,
                                                      const std::optional<std::string>& only_job) {
  std::vector<LeasedTask> out;
  auto tx = db_.begin(/*shared=*/true);
  if (!tx) return tx.error();
  // One statement picks and leases up to ?5 tasks of one job: only rows still
  // 'pending' can be taken. On PostgreSQL concurrent claims skip each other's
  // rows instead of waiting. The oldest running job with a task this peer may
  // take, then that job's lowest pending shards: two index walks (jobs by
  // (state, created), tasks by (state, job, shard)), never a sort of every
  // pending task. A job with fewer pending tasks than wanted: the next job.
  // The lease records the device's price and measured score now: the terms
  // it is paid at, whatever the device registers later.
  // The pick is a MATERIALIZED CTE, run once: as `id IN (SELECT ... LIMIT n
  // FOR UPDATE SKIP LOCKED)` PostgreSQL may plan it as a subquery re-run for
  // every pending row, each run skipping the rows this statement already
  // updated, so a claim for one task leased every pending task of the job.
  const std::string not_rejected = "NOT EXISTS (SELECT 1 FROM rejections x WHERE x.task = t.id AND x.peer = ?2)";
  const std::string payable = payable_by_device("?1");
  const std::string sql =
      "WITH picked AS MATERIALIZED (SELECT t.id FROM tasks t WHERE t.state = 'pending' AND t.job = " +
      (only_job ? "(SELECT j.id FROM jobs j WHERE j.id = ?6 AND j.state = 'running' AND " + payable + ")"
                : "(SELECT j.id FROM jobs j WHERE j.state = 'running' AND " + payable + " AND EXISTS (SELECT 1 FROM "
                  "tasks t WHERE t.state = 'pending' AND t.job = j.id AND " + not_rejected + ") ORDER BY j.created LIMIT 1)") +
      " AND " + not_rejected + " ORDER BY t.shard LIMIT ?5" + (db_.postgres() ? " FOR UPDATE SKIP LOCKED" : "") +
      ") UPDATE tasks SET state = 'leased', attempts = attempts + 1, device = ?1, worker = ?2, lease_start = ?3, "
      "lease_deadline = ?4, lease_price = (SELECT d.price FROM devices d WHERE d.id = ?1), "
      "lease_score = (SELECT d.score FROM devices d WHERE d.id = ?1) "
      "WHERE id IN (SELECT id FROM picked) AND state = 'pending' RETURNING id, job, shard, attempts";
  while (static_cast<std::int64_t>(out.size()) < max) {
    auto st = db_.prepare(sql);
    if (!st) return st.error();
    st->bind(1, std::string_view(device)).bind(2, std::string_view(peer)).bind(3, now_ms).bind(4, now_ms + policy_.lease_ms);
    st->bind(5, max - static_cast<std::int64_t>(out.size()));
    if (only_job) st->bind(6, std::string_view(*only_job));
    const std::size_t before = out.size();
    while (true) {
      auto row = st->step();
      if (!row) return row.error();
      if (!*row) break;
      LeasedTask t;
      t.id = st->column_text(0), t.job = st->column_text(1), t.shard = st->column_int64(2), t.attempt = st->column_int64(3);
      out.push_back(std::move(t));
    }
    if (out.size() == before) break;
    // RETURNING's order is unspecified: lowest shards first, as leased.
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(before), out.end(),
              [](const LeasedTask& a, const LeasedTask& b) { return a.shard < b.shard; });
  }
  for (auto& t : out) {
    auto meta = job_meta(t.job);
    if (!meta) return meta.error();
    t.spec = (*meta)->spec, t.shards = (*meta)->shards, t.workload = (*meta)->workload;
  }
  if (auto r = tx->commit(); !r) return r.error();
  for (const auto& t : out) remember_ref(t.id, TaskRef{t.job, t.shard});
  return out;
}

Result<void> PoolStore::unclaim(const std::string& task, std::int64_t attempt) {
  auto st = db_.prepare(
      "UPDATE tasks SET state = 'pending', attempts = attempts - 1, device = NULL, worker = NULL, lease_start = NULL, "
      "lease_deadline = NULL WHERE id = ? AND state = 'leased' AND attempts = ?");
  if (!st) return st.error();
  return st->bind(1, std::string_view(task)).bind(2, attempt).run();
}

Result<const PoolStore::JobMeta*> PoolStore::job_meta(const std::string& job) {
  if (auto it = job_meta_.find(job); it != job_meta_.end()) return &it->second;
  auto js = db_.prepare("SELECT spec, shards, workload FROM jobs WHERE id = ?");
  if (!js) return js.error();
  js->bind(1, std::string_view(job));
  auto jr = js->step();
  if (!jr) return jr.error();
  if (!*jr) return fail(errc::internal, "task without job");
  if (job_meta_.size() >= kMaxCachedJobs) job_meta_.clear();
  JobMeta m{js->column_text(2), nlohmann::json::parse(js->column_text(0), nullptr, false), js->column_int64(1)};
  return &job_meta_.emplace(job, std::move(m)).first->second;
}

void PoolStore::remember_ref(const std::string& task, TaskRef ref) {
  // Two generations: a full cache becomes the older one, so the refs of
  // tasks still out on lease are not all forgotten at once.
  if (task_refs_.size() >= kMaxCachedRefs) old_task_refs_ = std::exchange(task_refs_, {});
  task_refs_.emplace(task, std::move(ref));
}

Result<void> PoolStore::heartbeat(const std::string& peer, std::int64_t now_ms) {
  // Only leases with less than three quarters left: a batch of short tasks
  // is usually done before any needs it, so heartbeats do not rewrite every
  // fresh lease (long tasks are still renewed every lease/4 or so).
  auto st = db_.prepare(
      "UPDATE tasks SET lease_deadline = ?1 WHERE worker = ?2 AND state = 'leased' AND lease_deadline <= ?3");
  if (!st) return st.error();
  st->bind(1, now_ms + policy_.lease_ms).bind(2, std::string_view(peer)).bind(3, now_ms + policy_.lease_ms * 3 / 4);
  if (auto r = st->run(); !r) return r;
  auto dv = db_.prepare("UPDATE devices SET last_seen = ?, online = 1 WHERE peer = ?");
  if (!dv) return dv.error();
  return dv->bind(1, now_ms).bind(2, std::string_view(peer)).run();
}

Result<CompleteOutcome> PoolStore::complete(const std::string& task, std::int64_t attempt, const std::string& peer,
                                            const TaskResult& result, std::int64_t now_ms,
                                            std::int64_t arrived_ms) {
  const Completion one{task, attempt, &result, arrived_ms};
  auto out = complete_many(peer, {&one, 1}, now_ms);
  if (!out) return out.error();
  return std::move(out->front());
}

Result<std::vector<CompleteOutcome>> PoolStore::complete_many(const std::string& peer,
                                                              std::span<const Completion> results,
                                                              std::int64_t now_ms) {
  std::vector<CompleteOutcome> out(results.size());
  if (results.empty()) return out;
  auto tx = db_.begin();
  if (!tx) return tx.error();

  // 1. Every named task's lease, job and device, in one read.
  struct Lease {
    std::string state, worker, job, job_state, device;
    std::int64_t attempts = 0, lease_start = 0, shard = 0;
    std::int64_t paid_from = 0, paid_to = 0;  // the device time this result is paid for
    double score = 0, price = 0;  // the lease's terms, fixed when it was given
    Micro escrow = 0;           // what the job's escrow holds
    bool job_pending = false;   // the job has pending tasks (so cannot finish in this batch)
  };
  std::unordered_map<std::string, Lease> leases;
  std::map<std::string, std::int64_t> paid_until;  // device -> end of its last paid result
  {
    std::vector<std::string> ids;
    for (const auto& r : results)
      if (std::find(ids.begin(), ids.end(), r.task) == ids.end()) ids.push_back(r.task);
    auto st = db_.prepare(
        "SELECT t.id, t.state, t.attempts, t.worker, t.lease_start, t.job, j.state, "
        "CAST(COALESCE(t.lease_score, 0) AS BIGINT), CAST(COALESCE(t.lease_price, 0) AS BIGINT), t.shard, "
        "(SELECT b.amount FROM balances b WHERE b.account = ?1 || t.job), "
        "CASE WHEN EXISTS (SELECT 1 FROM tasks p WHERE p.state = 'pending' AND p.job = t.job) THEN 1 ELSE 0 END, "
        "t.device, (SELECT d.paid_until FROM devices d WHERE d.id = t.device) "
        "FROM tasks t JOIN jobs j ON j.id = t.job WHERE t.id IN (" + param_list(ids.size(), 2) + ")");
    if (!st) return st.error();
    st->bind(1, std::string_view(escrow_account("")));
    for (std::size_t i = 0; i < ids.size(); ++i) st->bind(static_cast<int>(i + 2), std::string_view(ids[i]));
    while (true) {
      auto row = st->step();
      if (!row) return row.error();
      if (!*row) break;
      Lease l;
      l.state = st->column_text(1), l.attempts = st->column_int64(2), l.worker = st->column_optional_text(3).value_or("");
      l.lease_start = st->column_optional_int64(4).value_or(now_ms), l.job = st->column_text(5);
      l.job_state = st->column_text(6), l.score = static_cast<double>(st->column_int64(7));
      l.price = static_cast<double>(st->column_int64(8)) / 1000.0;
      l.shard = st->column_int64(9);
      l.escrow = st->column_int64(10);
      l.job_pending = st->column_int64(11) != 0;
      l.device = st->column_optional_text(12).value_or("");
      if (l.device.empty()) l.device = "peer:" + l.worker;
      paid_until.emplace(l.device, st->column_optional_int64(13).value_or(0));
      leases.emplace(st->column_text(0), std::move(l));
    }
  }

  // 2. Which are accepted, in order (an accepted task is done for the ones after it).
  std::vector<std::size_t> accepted;
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto it = leases.find(results[i].task);
    if (it == leases.end()) {
      out[i].why = "no such task";
      continue;
    }
    Lease& l = it->second;
    if (l.state != "leased") out[i].why = "task is " + l.state;
    else if (l.attempts != results[i].attempt || l.worker != peer) out[i].why = "lease is no longer yours";
    else if (l.job_state != "running") out[i].why = "job is " + l.job_state;
    else l.state = "done", accepted.push_back(i);
  }
  if (accepted.empty()) return out;

  // The device time each is paid for: from the later of its lease's start and
  // the end of the device's last paid result, to the result's arrival. Tasks
  // leased together and returned together are not each paid the batch's
  // whole time; a result held for a quorum is not paid for the wait.
  for (std::size_t i : accepted) {
    Lease& l = leases[results[i].task];
    std::int64_t& until = paid_until[l.device];
    const std::int64_t arrived = results[i].arrived_ms > 0 ? std::min(results[i].arrived_ms, now_ms) : now_ms;
    l.paid_to = std::max(arrived, l.lease_start);
    l.paid_from = std::min(std::max(l.lease_start, until), l.paid_to);
    until = std::max(until, l.paid_to);
  }

  // 3. The tasks done and their results.
  {
    auto up = db_.prepare("UPDATE tasks SET state = 'done' WHERE id IN (" + param_list(accepted.size()) +
                          ") AND state = 'leased' RETURNING id");
    if (!up) return up.error();
    for (std::size_t k = 0; k < accepted.size(); ++k) up->bind(static_cast<int>(k + 1), std::string_view(results[accepted[k]].task));
    std::size_t changed = 0;
    while (true) {
      auto row = up->step();
      if (!row) return row.error();
      if (!*row) break;
      ++changed;
    }
    if (changed != accepted.size()) return fail(errc::internal, "a result's task changed while it was accepted");
    // With the terms the attempt was leased at: audit-ledger checks its payment against them.
    auto ins = db_.prepare(
        "INSERT INTO results (task, worker, exit_code, stdout, files, signature, received, lease_price, lease_score, "
        "lease_start, paid_from, paid_to) VALUES " + value_rows(accepted.size(), 12));
    if (!ins) return ins.error();
    for (std::size_t k = 0; k < accepted.size(); ++k) {
      const Completion& c = results[accepted[k]];
      const TaskResult& r = *c.result;
      const Lease& l = leases[c.task];
      const int p = static_cast<int>(k * 12);
      ins->bind(p + 1, std::string_view(c.task)).bind(p + 2, std::string_view(peer)).bind(p + 3, r.exit_code);
      ins->bind_blob(p + 4, {reinterpret_cast<const std::uint8_t*>(r.stdout_data.data()), r.stdout_data.size()});
      ins->bind(p + 5, std::string_view(r.files.dump())).bind(p + 6, std::string_view(r.signature)).bind(p + 7, now_ms);
      ins->bind(p + 8, static_cast<std::int64_t>(std::llround(l.price * 1000))).bind(p + 9, static_cast<std::int64_t>(l.score));
      ins->bind(p + 10, l.lease_start).bind(p + 11, l.paid_from).bind(p + 12, l.paid_to);
    }
    if (auto r = ins->run(); !r) return r.error();
    auto mark = db_.prepare("UPDATE devices SET paid_until = ?1 WHERE id = ?2 AND paid_until < ?1");
    if (!mark) return mark.error();
    for (const auto& [device, until] : paid_until) {
      if (device.starts_with("peer:")) continue;
      mark->reset();
      mark->bind(1, until).bind(2, std::string_view(device));
      if (auto r = mark->run(); !r) return r.error();
    }
  }

  // 4. Each payment out of its job's escrow, in order (never more than is left).
  std::vector<std::string> jobs;  // touched, in order of their last accepted result
  for (std::size_t i : accepted) {
    const std::string& job = leases[results[i].task].job;
    if (auto it = std::find(jobs.begin(), jobs.end(), job); it != jobs.end()) jobs.erase(it);
    jobs.push_back(job);
  }
  std::map<std::string, Micro> left;  // escrow account -> what it holds
  for (std::size_t i : accepted) {
    const Lease& l = leases[results[i].task];
    left.emplace(escrow_account(l.job), l.escrow);
  }
  std::vector<std::size_t> paid;
  std::map<std::string, Micro> moved;  // account -> its change
  for (std::size_t i : accepted) {
    const Lease& l = leases[results[i].task];
    Micro& have = left[escrow_account(l.job)];
    Micro charge = task_charge(l.price, l.score, std::chrono::milliseconds(l.paid_to - l.paid_from), have);
    have -= charge;
    out[i].paid = charge;
    if (charge > 0) {
      paid.push_back(i);
      moved[escrow_account(l.job)] -= charge;
      moved[peer_account(peer)] += charge;
    }
  }

  // 5. One ledger transaction per payment (escrow to provider), all in three statements.
  if (!paid.empty()) {
    std::string rows;
    for (std::size_t k = 0; k < paid.size(); ++k) rows += (k ? ", " : "") + std::string("('payment', ?1)");
    auto tx_ins = db_.prepare("INSERT INTO ledger_txns (kind, time) VALUES " + rows + " RETURNING id");
    if (!tx_ins) return tx_ins.error();
    tx_ins->bind(1, now_ms);
    // Every row is ('payment', now): which payment gets which id does not matter.
    std::vector<std::int64_t> txns;
    while (true) {
      auto row = tx_ins->step();
      if (!row) return row.error();
      if (!*row) break;
      txns.push_back(tx_ins->column_int64(0));
    }
    if (txns.size() != paid.size()) return fail(errc::internal, "ledger transactions not all made");
    std::sort(txns.begin(), txns.end());
    auto led = db_.prepare("INSERT INTO ledger (txn, account, amount, kind, task, job) VALUES " +
                           value_rows(2 * paid.size(), 6));
    if (!led) return led.error();
    int p = 0;
    for (std::size_t k = 0; k < paid.size(); ++k) {
      const Completion& c = results[paid[k]];
      const std::string& job = leases[c.task].job;
      const Micro charge = out[paid[k]].paid;
      for (const auto& [account, amount] : {std::pair{escrow_account(job), -charge}, std::pair{peer_account(peer), charge}}) {
        led->bind(p + 1, txns[k]).bind(p + 2, std::string_view(account)).bind(p + 3, amount);
        led->bind(p + 4, std::string_view("payment")).bind(p + 5, std::string_view(c.task)).bind(p + 6, std::string_view(job));
        p += 6;
      }
    }
    if (auto r = led->run(); !r) return r.error();
    // The kept balances, one row per account (a row may change once per statement).
    auto bal = db_.prepare("INSERT INTO balances (account, amount) VALUES " + value_rows(moved.size(), 2) +
                           " ON CONFLICT (account) DO UPDATE SET amount = balances.amount + excluded.amount");
    if (!bal) return bal.error();
    p = 0;
    for (const auto& [account, amount] : moved) {
      bal->bind(p + 1, std::string_view(account)).bind(p + 2, amount);
      p += 2;
    }
    if (auto r = bal->run(); !r) return r.error();
  }

  // 6. A job whose last task this was ends (its unused escrow returns). One
  // that had pending tasks still has them: claims wait for this transaction.
  // One whose escrow these payments emptied with work left fails: no priced
  // device would take its tasks, and none may work for nothing.
  for (const auto& job : jobs) {
    const bool had_pending = std::any_of(accepted.begin(), accepted.end(), [&](std::size_t i) {
      const Lease& l = leases[results[i].task];
      return l.job == job && l.job_pending;
    });
    if (left.count(escrow_account(job)) && left[escrow_account(job)] <= 0 && moved.count(escrow_account(job))) {
      auto open = maybe_finish(job, now_ms);  // done when this was its last task
      if (!open) return open.error();
      if (!*open) {
        if (auto r = finish_job(job, "failed", "its budget is spent with tasks left: submit them again with a larger --budget", now_ms); !r)
          return r.error();
      }
      for (auto k = accepted.rbegin(); k != accepted.rend(); ++k)
        if (leases[results[*k].task].job == job) {
          out[*k].job_finished = true;
          break;
        }
      continue;
    }
    if (had_pending) continue;
    auto finished = maybe_finish(job, now_ms);
    if (!finished) return finished.error();
    if (!*finished) continue;
    for (auto k = accepted.rbegin(); k != accepted.rend(); ++k)
      if (leases[results[*k].task].job == job) {
        out[*k].job_finished = true;
        break;
      }
  }
  if (auto r = tx->commit(); !r) return r.error();
  for (std::size_t i : accepted) {
    out[i].accepted = true;
    const Lease& l = leases[results[i].task];
    remember_ref(results[i].task, TaskRef{l.job, l.shard});
  }
  return out;
}

Result<bool> PoolStore::maybe_finish(const std::string& job, std::int64_t now_ms) {
  // Index lookups on (state, job): not a count over the job's tasks. A
  // running job holds failed tasks only when it allows failures (a failed
  // task fails any other job with it): those are finished too.
  auto st = db_.prepare(
      "SELECT CASE WHEN EXISTS (SELECT 1 FROM tasks WHERE state = 'pending' AND job = ?1) OR "
      "EXISTS (SELECT 1 FROM tasks WHERE state = 'leased' AND job = ?1) THEN 1 ELSE 0 END");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  if (auto row = st->step(); !row) return row.error();
  if (st->column_int64(0) != 0) return false;
  if (auto r = finish_job(job, "done", "", now_ms); !r) return r.error();
  return true;
}

Result<void> PoolStore::finish_job(const std::string& job, const std::string& state, const std::string& reason,
                                   std::int64_t now_ms) {
  auto st = db_.prepare(
      "UPDATE jobs SET state = ?, reason = ?, finished = ? WHERE id = ? AND state = 'running' RETURNING owner");
  if (!st) return st.error();
  st->bind(1, std::string_view(state)).bind(2, std::string_view(reason)).bind(3, now_ms).bind(4, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return {};
  std::string owner = st->column_text(0);
  if (auto more = st->step(); !more) return more.error();
  auto fl = db_.prepare("UPDATE tasks SET state = 'failed', last_error = ? WHERE job = ? AND state = 'pending'");
  if (!fl) return fl.error();
  if (auto r = fl->bind(1, std::string_view("job " + state)).bind(2, std::string_view(job)).run(); !r) return r;
  auto left = balance(escrow_account(job));
  if (!left) return left.error();
  if (*left > 0) {
    auto txn = new_txn("refund", now_ms);
    if (!txn) return txn.error();
    if (auto r = entry(*txn, escrow_account(job), -*left, "refund", std::nullopt, job); !r) return r;
    if (auto r = entry(*txn, peer_account(owner), *left, "refund", std::nullopt, job); !r) return r;
  }
  return {};
}

Result<void> PoolStore::requeue_or_fail(const std::string& task, const std::string& job, std::int64_t attempts,
                                        const std::string& reason, std::int64_t now_ms) {
  // Only lost attempts count against max_attempts here: runs that exited
  // non-zero follow the job's --retries (shard_failed()).
  auto q = db_.prepare("SELECT t.exit_failures, j.allow_failures FROM tasks t JOIN jobs j ON j.id = t.job WHERE t.id = ?");
  if (!q) return q.error();
  q->bind(1, std::string_view(task));
  auto row = q->step();
  if (!row) return row.error();
  const std::int64_t exit_failures = *row ? q->column_int64(0) : 0;
  const bool allow_failures = *row && q->column_int64(1) != 0;
  if (*row)
    if (auto more = q->step(); !more) return more.error();
  if (after_lost_attempt(static_cast<int>(attempts - exit_failures), policy_.max_attempts) == RetryDecision::requeue) {
    auto st = db_.prepare(
        "UPDATE tasks SET state = 'pending', worker = NULL, device = NULL, lease_deadline = NULL, last_error = ? "
        "WHERE id = ? AND state = 'leased'");
    if (!st) return st.error();
    return st->bind(1, std::string_view(reason)).bind(2, std::string_view(task)).run();
  }
  auto st = db_.prepare("UPDATE tasks SET state = 'failed', last_error = ? WHERE id = ? AND state = 'leased'");
  if (!st) return st.error();
  if (auto r = st->bind(1, std::string_view(reason)).bind(2, std::string_view(task)).run(); !r) return r;
  if (allow_failures) {
    auto finished = maybe_finish(job, now_ms);
    if (!finished) return finished.error();
    return {};
  }
  return finish_job(job, "failed",
                    "task " + task + " failed " + std::to_string(attempts) + " times; last: " + reason, now_ms);
}

Result<void> PoolStore::fail_attempt(const std::string& task, std::int64_t attempt, const std::string& peer,
                                     const std::string& reason, std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto st = db_.prepare("SELECT job, attempts FROM tasks WHERE id = ? AND state = 'leased' AND worker = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task)).bind(2, std::string_view(peer));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_int64(1) != attempt) return {};  // not this peer's live lease: nothing to undo
  std::string job = st->column_text(0);
  if (auto r = requeue_or_fail(task, job, attempt, reason, now_ms); !r) return r;
  return tx->commit();
}

Result<int> PoolStore::release_worker(const std::string& peer, std::int64_t now_ms) {
  return release_leases(peer, nullptr, "worker " + peer + " went away", now_ms);
}

Result<int> PoolStore::release_stale_leases(const std::string& peer, const std::vector<std::string>& keep,
                                            std::int64_t now_ms) {
  return release_leases(peer, &keep, "worker " + peer + " came back without this task", now_ms);
}

// keep == nullptr: the worker is gone (all its leases, device offline).
Result<int> PoolStore::release_leases(const std::string& peer, const std::vector<std::string>* keep,
                                      const std::string& reason, std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto st = db_.prepare("SELECT id, job, attempts FROM tasks WHERE worker = ? AND state = 'leased'");
  if (!st) return st.error();
  st->bind(1, std::string_view(peer));
  std::vector<std::tuple<std::string, std::string, std::int64_t>> leased;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    std::string id = st->column_text(0);
    if (keep && std::find(keep->begin(), keep->end(), id) != keep->end()) continue;
    leased.emplace_back(std::move(id), st->column_text(1), st->column_int64(2));
  }
  for (const auto& [task, job, attempts] : leased)
    if (auto r = requeue_or_fail(task, job, attempts, reason, now_ms); !r) return r.error();
  if (!keep) {
    auto dv = db_.prepare("UPDATE devices SET online = 0 WHERE peer = ?");
    if (!dv) return dv.error();
    if (auto r = dv->bind(1, std::string_view(peer)).run(); !r) return r.error();
  }
  if (auto r = tx->commit(); !r) return r.error();
  return static_cast<int>(leased.size());
}

Result<int> PoolStore::expire_leases(std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  // Only the leases past their deadline: not every lease, four times a second.
  auto st = db_.prepare("SELECT id, job, attempts, lease_deadline FROM tasks WHERE state = 'leased' AND lease_deadline <= ?");
  if (!st) return st.error();
  st->bind(1, now_ms);
  std::vector<std::tuple<std::string, std::string, std::int64_t>> expired;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    TimePoint deadline{std::chrono::milliseconds(st->column_int64(3))};
    if (lease_expired(deadline, TimePoint{std::chrono::milliseconds(now_ms)}))
      expired.emplace_back(st->column_text(0), st->column_text(1), st->column_int64(2));
  }
  for (const auto& [task, job, attempts] : expired)
    if (auto r = requeue_or_fail(task, job, attempts, "lease expired", now_ms); !r) return r.error();
  if (auto r = tx->commit(); !r) return r.error();
  return static_cast<int>(expired.size());
}

Result<void> PoolStore::cancel_job(const std::string& job, const std::string& owner, std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto st = db_.prepare("SELECT owner, state FROM jobs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_text(0) != owner) return fail(errc::not_found, "no job " + job + " of yours");
  if (st->column_text(1) != "running") return fail(errc::refused, "job " + job + " is already " + st->column_text(1));
  if (auto r = finish_job(job, "cancelled", "cancelled by its owner", now_ms); !r) return r;
  return tx->commit();
}

namespace {
JobStatus read_job(SqlStmt& st) {
  JobStatus j;
  j.id = st.column_text(0), j.owner = st.column_text(1), j.state = st.column_text(2), j.reason = st.column_text(3);
  j.workload = st.column_text(4), j.tasks = st.column_int64(5), j.budget = st.column_int64(6);
  j.pending = st.column_int64(7), j.leased = st.column_int64(8);
  j.failed = st.column_int64(10), j.spent = st.column_int64(11);
  // A job's tasks are made with it, one per shard, plus its quorum copies
  // (add_copy), and never removed: the rest are done (no count over the
  // finished tasks).
  j.done = st.column_int64(9) - j.pending - j.leased - j.failed;
  j.info = nlohmann::json::parse(st.column_text(12), nullptr, false);
  j.verified = st.column_int64(13), j.rejected = st.column_int64(14);
  j.verify_us = st.column_int64(15), j.compute_us = st.column_int64(16);
  j.rules.retries = static_cast<int>(st.column_int64(17)), j.rules.allow_failures = st.column_int64(18) != 0;
  j.unverified = st.column_int64(19);
  return j;
}
constexpr const char* kJobColumns =
    "SELECT j.id, j.owner, j.state, j.reason, j.workload, j.shards, j.budget, "
    "(SELECT COUNT(*) FROM tasks t WHERE t.job = j.id AND t.state = 'pending'), "
    "(SELECT COUNT(*) FROM tasks t WHERE t.job = j.id AND t.state = 'leased'), "
    "j.shards + (SELECT COUNT(*) FROM copies c WHERE c.job = j.id), "
    "(SELECT COUNT(*) FROM tasks t WHERE t.job = j.id AND t.state = 'failed'), "
    "(SELECT COALESCE(SUM(amount), 0) FROM ledger l WHERE l.job = j.id AND l.kind = 'payment' AND l.amount > 0), "
    "j.info, j.verified, j.rejected, j.verify_us, j.compute_us, j.retries, j.allow_failures, j.unverified "
    "FROM jobs j ";
}  // namespace

Result<JobStatus> PoolStore::job_status(const std::string& job) {
  auto st = db_.prepare(std::string(kJobColumns) + "WHERE j.id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no job " + job);
  return read_job(*st);
}

Result<std::vector<JobStatus>> PoolStore::jobs(const std::optional<std::string>& owner) {
  auto st = db_.prepare(std::string(kJobColumns) + "WHERE ?1 IS NULL OR j.owner = ?1 ORDER BY j.created");
  if (!st) return st.error();
  st->bind(1, owner);
  std::vector<JobStatus> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(read_job(*st));
  }
  return out;
}

Result<std::optional<TaskResult>> PoolStore::result(const std::string& job, std::int64_t shard) {
  auto st = db_.prepare(
      "SELECT r.exit_code, r.stdout, r.files, r.signature FROM results r JOIN tasks t ON t.id = r.task "
      "WHERE t.job = ? AND t.shard = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job)).bind(2, shard);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<TaskResult>{};
  TaskResult r;
  r.exit_code = st->column_int64(0);
  auto blob = st->column_blob(1);
  r.stdout_data.assign(blob.begin(), blob.end());
  r.files = nlohmann::json::parse(st->column_text(2), nullptr, false);
  r.signature = st->column_text(3);
  return std::optional<TaskResult>(std::move(r));
}

Result<JobDefinition> PoolStore::job_definition(const std::string& job) {
  auto st = db_.prepare("SELECT workload, spec, input FROM jobs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no job " + job);
  return JobDefinition{st->column_text(0), nlohmann::json::parse(st->column_text(1), nullptr, false),
                       nlohmann::json::parse(st->column_text(2), nullptr, false)};
}

Result<std::optional<TaskRef>> PoolStore::task_ref(const std::string& task) {
  if (auto it = task_refs_.find(task); it != task_refs_.end()) return std::optional<TaskRef>(it->second);
  if (auto it = old_task_refs_.find(task); it != old_task_refs_.end()) return std::optional<TaskRef>(it->second);
  auto st = db_.prepare("SELECT job, shard FROM tasks WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<TaskRef>{};
  TaskRef ref{st->column_text(0), st->column_int64(1)};
  remember_ref(task, ref);
  return std::optional<TaskRef>(std::move(ref));
}

Result<std::optional<std::string>> PoolStore::record_check(const std::string& device, const std::string& task,
                                                          const std::string& peer, bool valid, const std::string& reason,
                                                          std::int64_t exclude_after, std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto up = db_.prepare(valid ? "UPDATE devices SET valid = valid + 1 WHERE id = ? RETURNING invalid"
                              : "UPDATE devices SET invalid = invalid + 1 WHERE id = ? RETURNING invalid");
  if (!up) return up.error();
  up->bind(1, std::string_view(device));
  auto row = up->step();
  if (!row) return row.error();
  std::int64_t invalid = *row ? up->column_int64(0) : 0;
  if (*row)
    if (auto more = up->step(); !more) return more.error();
  std::optional<std::string> excluded;
  if (!valid) {
    auto rj = db_.prepare("INSERT INTO rejections (task, peer, reason, time) VALUES (?, ?, ?, ?)");
    if (!rj) return rj.error();
    if (auto r = rj->bind(1, std::string_view(task)).bind(2, std::string_view(peer)).bind(3, std::string_view(reason)).bind(4, now_ms).run(); !r)
      return r.error();
    if (exclude_after > 0 && invalid >= exclude_after) {
      excluded = std::to_string(invalid) + " results caught wrong; last: " + reason;
      auto ex = db_.prepare("UPDATE devices SET excluded = ? WHERE id = ? AND excluded IS NULL");
      if (!ex) return ex.error();
      if (auto r = ex->bind(1, std::string_view(*excluded)).bind(2, std::string_view(device)).run(); !r) return r.error();
    }
  }
  if (auto r = tx->commit(); !r) return r.error();
  return excluded;
}

Result<std::int64_t> PoolStore::valid_results(const std::string& device) {
  auto st = db_.prepare("SELECT valid FROM devices WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(device));
  auto row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int64(0) : std::int64_t{0};
}

Result<std::optional<std::string>> PoolStore::exclusion(const std::string& device) {
  auto st = db_.prepare("SELECT excluded FROM devices WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(device));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::string>{};
  return st->column_optional_text(0);
}

Result<void> PoolStore::record_verification(const std::string& job, bool accepted, std::int64_t verify_us,
                                            std::int64_t compute_us) {
  auto st = db_.prepare(
      "UPDATE jobs SET verified = verified + 1, rejected = rejected + ?, verify_us = verify_us + ?, "
      "compute_us = compute_us + ? WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, std::int64_t{accepted ? 0 : 1}).bind(2, verify_us).bind(3, compute_us).bind(4, std::string_view(job)).run();
}

Result<AuditReport> PoolStore::audit() {
  std::vector<LedgerEntry> entries;
  auto st = db_.prepare("SELECT txn, account, amount, kind, task FROM ledger ORDER BY seq");
  if (!st) return st.error();
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    entries.push_back({st->column_int64(0), st->column_text(1), st->column_int64(2), st->column_text(3),
                       st->column_optional_text(4)});
  }
  std::map<std::string, std::string> finisher;
  std::map<std::string, PaidTerms> terms;  // results accepted since leases record their terms
  auto ts = db_.prepare(
      "SELECT r.task, r.worker, r.lease_price, r.lease_score, r.lease_start, r.received, r.paid_from, r.paid_to, "
      "t.device FROM results r JOIN tasks t ON t.id = r.task WHERE t.state = 'done'");
  if (!ts) return ts.error();
  while (true) {
    auto row = ts->step();
    if (!row) return row.error();
    if (!*row) break;
    finisher[ts->column_text(0)] = ts->column_text(1);
    auto price = ts->column_optional_int64(2), score = ts->column_optional_int64(3), start = ts->column_optional_int64(4);
    if (!price || !score || !start) continue;
    PaidTerms t{static_cast<double>(*price) / 1000.0, static_cast<double>(*score),
                std::chrono::milliseconds(ts->column_int64(5) - *start), ts->column_optional_text(8).value_or(""), {}};
    auto from = ts->column_optional_int64(6), to = ts->column_optional_int64(7);
    if (from && to) t.run_time = std::chrono::milliseconds(*to - *from), t.paid_span = std::pair{*from, *to};
    terms[ts->column_text(0)] = std::move(t);
  }
  AuditReport report = audit_ledger(entries, finisher, terms);
  // The kept balances must be the ledger's sums.
  std::map<std::string, Micro> sums;
  for (const auto& e : entries) sums[e.account] += e.amount;
  auto bs = db_.prepare("SELECT account, amount FROM balances");
  if (!bs) return bs.error();
  std::map<std::string, Micro> kept;
  while (true) {
    auto row = bs->step();
    if (!row) return row.error();
    if (!*row) break;
    kept[bs->column_text(0)] = bs->column_int64(1);
  }
  for (const auto& [account, sum] : sums)
    if (kept[account] != sum) {
      report.ok = false;
      report.problems.push_back("balance of " + account + " is kept as " + format_credits(kept[account]) +
                                " but its entries sum to " + format_credits(sum));
    }
  return report;
}

// --- read-only views for the dashboard -----------------------------------------------

Result<std::vector<JobStatus>> PoolStore::recent_jobs(std::int64_t limit) {
  auto st = db_.prepare(std::string(kJobColumns) + "ORDER BY j.created DESC, j.id DESC LIMIT ?");
  if (!st) return st.error();
  st->bind(1, limit);
  std::vector<JobStatus> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(read_job(*st));
  }
  return out;
}

Result<std::vector<LedgerRecord>> PoolStore::recent_entries(std::int64_t limit) {
  auto st = db_.prepare(
      "SELECT l.txn, x.time, l.account, l.amount, l.kind, l.task, l.job FROM ledger l "
      "JOIN ledger_txns x ON x.id = l.txn ORDER BY l.seq DESC LIMIT ?");
  if (!st) return st.error();
  st->bind(1, limit);
  std::vector<LedgerRecord> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    LedgerRecord r;
    r.txn = st->column_int64(0), r.time_ms = st->column_int64(1), r.account = st->column_text(2);
    r.amount = st->column_int64(3), r.kind = st->column_text(4), r.task = st->column_optional_text(5);
    r.job = st->column_text(6);
    out.push_back(std::move(r));
  }
  return out;
}

Result<LedgerTotals> PoolStore::ledger_totals() {
  auto st = db_.prepare(
      "SELECT kind, COALESCE(SUM(amount), 0) FROM ledger WHERE amount > 0 GROUP BY kind "
      "UNION ALL SELECT 'held', COALESCE(SUM(amount), 0) FROM ledger WHERE account LIKE 'escrow:%'");
  if (!st) return st.error();
  LedgerTotals t;
  const std::map<std::string, Micro*> slots = {{"mint", &t.minted},    {"escrow", &t.escrowed}, {"payment", &t.paid},
                                               {"refund", &t.refunded}, {"held", &t.held}};
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    if (auto it = slots.find(st->column_text(0)); it != slots.end()) *it->second = st->column_int64(1);
  }
  return t;
}

Result<std::map<std::string, Micro>> PoolStore::earnings_by_device() {
  auto st = db_.prepare(
      "SELECT t.device, COALESCE(SUM(l.amount), 0) FROM ledger l JOIN tasks t ON t.id = l.task "
      "WHERE l.kind = 'payment' AND l.amount > 0 AND t.device IS NOT NULL GROUP BY t.device");
  if (!st) return st.error();
  std::map<std::string, Micro> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out[st->column_text(0)] = st->column_int64(1);
  }
  return out;
}

// --- Copies for a quorum (exec --replicas / --spot-check) -----------------------

Result<std::string> PoolStore::add_copy(const std::string& job, std::int64_t of_shard,
                                        const std::vector<std::string>& avoid_peers, std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto next = db_.prepare("SELECT COALESCE(MAX(shard), -1) + 1 FROM tasks WHERE job = ?");
  if (!next) return next.error();
  next->bind(1, std::string_view(job));
  auto row = next->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no job " + job);
  const std::int64_t shard = next->column_int64(0);
  const std::string task = job + "." + std::to_string(shard);
  auto ins = db_.prepare("INSERT INTO tasks (id, job, shard, state) VALUES (?, ?, ?, 'pending')");
  if (!ins) return ins.error();
  if (auto r = ins->bind(1, std::string_view(task)).bind(2, std::string_view(job)).bind(3, shard).run(); !r) return r.error();
  auto cp = db_.prepare("INSERT INTO copies (task, job, of_shard) VALUES (?, ?, ?)");
  if (!cp) return cp.error();
  if (auto r = cp->bind(1, std::string_view(task)).bind(2, std::string_view(job)).bind(3, of_shard).run(); !r) return r.error();
  for (const auto& peer : avoid_peers)
    if (auto r = avoid_peer(task, peer, "a copy runs on another peer", now_ms); !r) return r.error();
  if (auto r = tx->commit(); !r) return r.error();
  return task;
}

Result<void> PoolStore::avoid_peer(const std::string& task, const std::string& peer, const std::string& reason,
                                   std::int64_t now_ms) {
  auto st = db_.prepare("INSERT INTO rejections (task, peer, reason, time) VALUES (?, ?, ?, ?)");
  if (!st) return st.error();
  return st->bind(1, std::string_view(task)).bind(2, std::string_view(peer)).bind(3, std::string_view(reason)).bind(4, now_ms).run();
}

Result<std::optional<std::int64_t>> PoolStore::copy_of(const std::string& task) {
  auto st = db_.prepare("SELECT of_shard FROM copies WHERE task = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::int64_t>{};
  return std::optional<std::int64_t>{st->column_int64(0)};
}

Result<std::vector<std::string>> PoolStore::copies_of(const std::string& job, std::int64_t of_shard) {
  auto st = db_.prepare("SELECT task FROM copies WHERE job = ? AND of_shard = ? ORDER BY task");
  if (!st) return st.error();
  st->bind(1, std::string_view(job)).bind(2, of_shard);
  std::vector<std::string> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(st->column_text(0));
  }
  return out;
}

Result<bool> PoolStore::retire_copy(const std::string& task, const std::string& why, std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto job = db_.prepare("SELECT job FROM copies WHERE task = ?");
  if (!job) return job.error();
  job->bind(1, std::string_view(task));
  auto row = job->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, task + " is not a copy");
  const std::string id = job->column_text(0);
  auto st = db_.prepare("UPDATE tasks SET state = 'done', device = NULL, worker = NULL, last_error = ? WHERE id = ?");
  if (!st) return st.error();
  if (auto r = st->bind(1, std::string_view(why)).bind(2, std::string_view(task)).run(); !r) return r.error();
  auto finished = maybe_finish(id, now_ms);  // it may have been the job's last open row
  if (!finished) return finished.error();
  if (auto r = tx->commit(); !r) return r.error();
  return *finished;
}

Result<bool> PoolStore::retire_pending_copies(const std::string& job, std::int64_t of_shard, const std::string& why,
                                              std::int64_t now_ms) {
  auto tx = db_.begin();
  if (!tx) return tx.error();
  auto st = db_.prepare(
      "UPDATE tasks SET state = 'done', last_error = ? WHERE state = 'pending' AND id IN "
      "(SELECT task FROM copies WHERE job = ? AND of_shard = ?)");
  if (!st) return st.error();
  if (auto r = st->bind(1, std::string_view(why)).bind(2, std::string_view(job)).bind(3, of_shard).run(); !r)
    return r.error();
  auto finished = maybe_finish(job, now_ms);
  if (!finished) return finished.error();
  if (auto r = tx->commit(); !r) return r.error();
  return *finished;
}

Result<std::int64_t> PoolStore::copy_count(const std::string& job) {
  auto st = db_.prepare("SELECT COUNT(*) FROM copies WHERE job = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int64(0) : 0;
}

}  // namespace runsnack::pool
