// PoolStore: tasks and their leases: which tasks a device may take, claims,
// heartbeats, and leases given back, released or expired (requeued, the
// device charged: pool/scheduler.hpp LeaseRecord), or failed by a worker.
#include "pool/pool_store.hpp"

#include "pool/scheduler.hpp"

#include <algorithm>
#include <utility>

namespace runsnack::pool {
namespace {

// No work without pay: a job `j` whose tasks the device (an SQL parameter)
// may take: any job for a free device (price 0), for a priced one only a job
// whose escrow holds credit (a job without a budget goes to free devices only).
// Whether the device whose DeviceRuns::sql_list() is the parameter can run
// job j: "*" runs any; else the list ",a,b," holds the job's needs ('' is
// never listed: jobs from before needs existed go to native devices).
std::string runnable_by(const std::string& runs_param) {
  return "(" + runs_param + " = '*' OR " + runs_param + " LIKE ('%,' || j.needs || ',%'))";
}

std::string payable_by_device(const std::string& device_param) {
  return "(COALESCE((SELECT d.price FROM devices d WHERE d.id = " + device_param + "), 0) = 0 OR "
         "COALESCE((SELECT b.amount FROM balances b WHERE b.account = 'escrow:' || j.id), 0) > 0)";
}

}  // namespace

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
                                                                     const std::string& peer, const std::string& device,
                                                                     const std::string& runs) {
  auto st = db_.prepare(
      "SELECT j.id, j.workload, j.info, (SELECT COUNT(*) FROM (SELECT 1 FROM tasks t WHERE t.state = 'pending' "
      "AND t.job = j.id AND NOT EXISTS (SELECT 1 FROM rejections x WHERE x.task = t.id AND x.peer = ?3) "
      "LIMIT ?2) AS x) FROM jobs j WHERE j.state = 'running' AND " + payable_by_device("?4") + " AND " +
      runnable_by("?5") + " AND EXISTS "
      "(SELECT 1 FROM tasks t WHERE t.state = 'pending' AND t.job = j.id AND NOT EXISTS (SELECT 1 FROM rejections x "
      "WHERE x.task = t.id AND x.peer = ?3)) ORDER BY j.created LIMIT ?1");
  if (!st) return st.error();
  st->bind(1, limit).bind(2, count_limit).bind(3, std::string_view(peer)).bind(4, std::string_view(device));
  st->bind(5, std::string_view(runs));
  return read_rows(*st, [](Statement& r) {
    return PendingJobRow{r.column_text(0), r.column_text(1), r.column_int64(3),
                         nlohmann::json::parse(r.column_text(2), nullptr, false)};
  });
}

Result<std::optional<LeasedTask>> PoolStore::claim(const std::string& device, const std::string& peer,
                                                   std::int64_t now_ms, const std::optional<std::string>& only_job,
                                                   const std::string& runs) {
  auto tasks = claim_many(device, peer, now_ms, 1, only_job, runs);
  if (!tasks) return tasks.error();
  if (tasks->empty()) return std::optional<LeasedTask>{};
  return std::optional<LeasedTask>(std::move(tasks->front()));
}

Result<std::vector<LeasedTask>> PoolStore::claim_many(const std::string& device, const std::string& peer,
                                                      std::int64_t now_ms, std::int64_t max,
                                                      const std::optional<std::string>& only_job,
                                                      const std::string& runs, std::optional<std::int64_t> prefer_shard) {
  std::vector<LeasedTask> out;
  auto tx = Transaction::begin(db_, Transaction::Lock::shared);
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
  // Parameters are numbered without gaps (PostgreSQL must type each one).
  const std::string payable = payable_by_device("?1") + " AND " + runnable_by(only_job ? "?7" : "?6");
  const std::string sql =
      "WITH picked AS MATERIALIZED (SELECT t.id FROM tasks t WHERE t.state = 'pending' AND t.job = " +
      (only_job ? "(SELECT j.id FROM jobs j WHERE j.id = ?6 AND j.state = 'running' AND " + payable + ")"
                : "(SELECT j.id FROM jobs j WHERE j.state = 'running' AND " + payable + " AND EXISTS (SELECT 1 FROM "
                  "tasks t WHERE t.state = 'pending' AND t.job = j.id AND " + not_rejected + ") ORDER BY j.created LIMIT 1)") +
      " AND " + not_rejected + " ORDER BY " + (prefer_shard ? "t.shard <> ?" + std::to_string(only_job ? 8 : 7) + ", " : "") +
      "t.shard LIMIT ?5" + (db_.postgres() ? " FOR UPDATE SKIP LOCKED" : "") +
      ") UPDATE tasks SET state = 'leased', attempts = attempts + 1, device = ?1, worker = ?2, lease_start = ?3, "
      "lease_deadline = ?4, lease_price = (SELECT d.price FROM devices d WHERE d.id = ?1), "
      "lease_score = (SELECT d.score FROM devices d WHERE d.id = ?1) "
      "WHERE id IN (SELECT id FROM picked) AND state = 'pending' RETURNING id, job, shard, attempts";
  while (static_cast<std::int64_t>(out.size()) < max) {
    auto st = db_.prepare(sql);
    if (!st) return st.error();
    st->bind(1, std::string_view(device)).bind(2, std::string_view(peer)).bind(3, now_ms).bind(4, now_ms + policy_.lease_ms);
    st->bind(5, max - static_cast<std::int64_t>(out.size()));
    if (only_job) st->bind(6, std::string_view(*only_job)).bind(7, std::string_view(runs));
    else st->bind(6, std::string_view(runs));
    if (prefer_shard) st->bind(only_job ? 8 : 7, *prefer_shard);
    const std::size_t before = out.size();
    auto leased = for_each_row(*st, [&](Statement& r) {
      LeasedTask t;
      t.id = r.column_text(0), t.job = r.column_text(1), t.shard = r.column_int64(2), t.attempt = r.column_int64(3);
      out.push_back(std::move(t));
    });
    if (!leased) return leased.error();
    if (out.size() == before) break;
    // RETURNING's order is unspecified: lowest shards first, as leased.
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(before), out.end(),
              [](const LeasedTask& a, const LeasedTask& b) { return a.shard < b.shard; });
  }
  for (auto& t : out) {
    auto meta = job_meta(t.job);
    if (!meta) return meta.error();
    t.spec = (*meta)->spec, t.shards = (*meta)->shards, t.workload = (*meta)->workload, t.needs = (*meta)->needs;
  }
  if (auto r = tx->commit(); !r) return r.error();
  for (const auto& t : out) remember_ref(t.id, TaskRef{t.job, t.shard});
  return out;
}

Result<std::optional<std::string>> PoolStore::lease_lost(const std::string& task, std::int64_t attempt,
                                                        const std::string& peer) {
  auto st = db_.prepare("SELECT state, worker, attempts, last_error FROM tasks WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task));
  std::optional<std::string> why = std::string("the task is gone");
  auto read = for_each_row(*st, [&](Statement& r) {
    const std::string state = r.column_text(0);
    if (state == "leased" && r.column_optional_text(1).value_or("") == peer && r.column_int64(2) == attempt) {
      why.reset();
      return;
    }
    const std::string error = r.column_optional_text(3).value_or("");
    why = state == "leased" || state == "pending" ? std::string("the task went to another device")
          : error.empty()                         ? "the task is " + state
                                                  : error;
  });
  if (!read) return read.error();
  return why;
}

Result<void> PoolStore::unclaim(const std::string& task, std::int64_t attempt) {
  auto st = db_.prepare(
      "UPDATE tasks SET state = 'pending', attempts = attempts - 1, device = NULL, worker = NULL, lease_start = NULL, "
      "lease_deadline = NULL WHERE id = ? AND state = 'leased' AND attempts = ?");
  if (!st) return st.error();
  return st->bind(1, std::string_view(task)).bind(2, attempt).run();
}

Result<std::optional<std::string>> PoolStore::abandon(const std::string& task, std::int64_t attempt,
                                                     const std::string& peer, std::int64_t started_by_ms) {
  auto st = db_.prepare(
      "UPDATE tasks SET state = 'pending', attempts = attempts - 1, device = NULL, worker = NULL, lease_start = NULL, "
      "lease_deadline = NULL WHERE id = ? AND state = 'leased' AND attempts = ? AND worker = ? AND lease_start <= ? "
      "RETURNING job");
  if (!st) return st.error();
  st->bind(1, std::string_view(task)).bind(2, attempt).bind(3, std::string_view(peer)).bind(4, started_by_ms);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::string>{};
  return std::optional<std::string>(st->column_text(0));
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

Result<PoolStore::LeaseStanding> PoolStore::lease_standing(const std::string& device, const std::string& peer) {
  auto st = db_.prepare(
      "SELECT d.completed, d.lost, (SELECT COUNT(*) FROM tasks t WHERE t.worker = ?2 AND t.state = 'leased' AND "
      "t.device = ?1) FROM devices d WHERE d.id = ?1");
  if (!st) return st.error();
  st->bind(1, std::string_view(device)).bind(2, std::string_view(peer));
  auto row = st->step();
  if (!row) return row.error();
  LeaseStanding out;
  if (*row) out.record = {st->column_int64(0), st->column_int64(1)}, out.held = st->column_int64(2);
  return out;
}

Result<std::int64_t> PoolStore::fresh_leases(const std::string& network) {
  // Leased tasks are few (bounded by the devices' caps): a walk of them, not of every task.
  auto st = db_.prepare(
      "SELECT COUNT(*) FROM tasks t JOIN devices d ON d.id = t.device WHERE t.state = 'leased' AND d.network = ? "
      "AND d.completed = 0");
  if (!st) return st.error();
  st->bind(1, std::string_view(network));
  auto row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int64(0) : std::int64_t{0};
}

Result<void> PoolStore::requeue_lost(const std::string& task, const std::string& device, const std::string& reason) {
  auto st = db_.prepare(
      "UPDATE tasks SET state = 'pending', worker = NULL, device = NULL, lease_deadline = NULL, last_error = ? "
      "WHERE id = ? AND state = 'leased'");
  if (!st) return st.error();
  if (auto r = st->bind(1, std::string_view(reason)).bind(2, std::string_view(task)).run(); !r) return r;
  if (device.empty()) return {};
  auto charge = db_.prepare("UPDATE devices SET lost = lost + 1 WHERE id = ? RETURNING completed, lost");
  if (!charge) return charge.error();
  charge->bind(1, std::string_view(device));
  auto row = charge->step();
  if (!row) return row.error();
  if (!*row) return {};
  const LeaseRecord record{charge->column_int64(0), charge->column_int64(1)};
  if (auto more = charge->step(); !more) return more.error();
  if (!excluded_for_losses(record)) return {};
  const std::string why = std::to_string(record.lost) + " leases lost (went away or let them lapse) against " +
                          std::to_string(record.completed) + " results";
  auto ex = db_.prepare("UPDATE devices SET excluded = ? WHERE id = ? AND excluded IS NULL");
  if (!ex) return ex.error();
  return ex->bind(1, std::string_view(why)).bind(2, std::string_view(device)).run();
}

Result<bool> PoolStore::failure_counts(const std::string& task, const std::string& device, const std::string& peer) {
  auto st = db_.prepare(
      "SELECT CASE WHEN COALESCE((SELECT completed FROM devices WHERE id = ?1), 0) >= ?3 THEN 1 "
      "WHEN EXISTS (SELECT 1 FROM devices d WHERE d.online = 1 AND d.excluded IS NULL AND d.completed >= ?3 "
      "AND d.peer <> ?2 AND NOT EXISTS (SELECT 1 FROM rejections x WHERE x.task = ?4 AND x.peer = d.peer)) THEN 0 "
      "ELSE 1 END");
  if (!st) return st.error();
  st->bind(1, std::string_view(device)).bind(2, std::string_view(peer)).bind(3, kRecordResults);
  st->bind(4, std::string_view(task));
  auto row = st->step();
  if (!row) return row.error();
  return *row && st->column_int64(0) != 0;
}

Result<void> PoolStore::fail_attempt(const std::string& task, std::int64_t attempt, const std::string& peer,
                                     const std::string& reason, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto st = db_.prepare(
      "SELECT t.job, t.attempts, COALESCE(t.device, ''), j.allow_failures FROM tasks t JOIN jobs j ON j.id = t.job "
      "WHERE t.id = ? AND t.state = 'leased' AND t.worker = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task)).bind(2, std::string_view(peer));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_int64(1) != attempt) return {};  // not this peer's live lease: nothing to undo
  const std::string job = st->column_text(0), device = st->column_text(2);
  const bool allow_failures = st->column_int64(3) != 0;
  if (auto more = st->step(); !more) return more.error();
  auto counts = failure_counts(task, device, peer);
  if (!counts) return counts.error();
  std::int64_t failures = 0;
  if (*counts) {
    auto up = db_.prepare("UPDATE tasks SET worker_failures = worker_failures + 1 WHERE id = ? RETURNING worker_failures");
    if (!up) return up.error();
    up->bind(1, std::string_view(task));
    auto counted = up->step();
    if (!counted) return counted.error();
    failures = *counted ? up->column_int64(0) : 0;
    if (*counted)
      if (auto more = up->step(); !more) return more.error();
  } else if (auto r = avoid_peer(task, peer, "failed it without a record: " + reason, now_ms); !r) {
    return r;  // a device with a record runs it instead
  }
  if (failures < policy_.max_attempts) {
    auto back = db_.prepare(
        "UPDATE tasks SET state = 'pending', worker = NULL, device = NULL, lease_deadline = NULL, last_error = ? "
        "WHERE id = ? AND state = 'leased'");
    if (!back) return back.error();
    if (auto r = back->bind(1, std::string_view(reason)).bind(2, std::string_view(task)).run(); !r) return r;
    return tx->commit();
  }
  auto failed = db_.prepare("UPDATE tasks SET state = 'failed', last_error = ? WHERE id = ? AND state = 'leased'");
  if (!failed) return failed.error();
  if (auto r = failed->bind(1, std::string_view(reason)).bind(2, std::string_view(task)).run(); !r) return r;
  if (allow_failures) {
    if (auto finished = maybe_finish(job, now_ms); !finished) return finished.error();
  } else if (auto r = finish_job(job, "failed", "task " + task + " failed " + std::to_string(failures) +
                                                    " times; last: " + reason, now_ms);
             !r) {
    return r;
  }
  return tx->commit();
}

Result<int> PoolStore::release_worker(const std::string& peer) {
  return release_leases(peer, nullptr, "worker " + peer + " went away");
}

Result<int> PoolStore::release_stale_leases(const std::string& peer, const std::vector<std::string>& keep) {
  return release_leases(peer, &keep, "worker " + peer + " came back without this task");
}

// keep == nullptr: the worker is gone (all its leases, device offline).
Result<int> PoolStore::release_leases(const std::string& peer, const std::vector<std::string>* keep,
                                      const std::string& reason) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto st = db_.prepare("SELECT id, device FROM tasks WHERE worker = ? AND state = 'leased'");
  if (!st) return st.error();
  st->bind(1, std::string_view(peer));
  std::vector<std::pair<std::string, std::string>> leased;
  auto read = for_each_row(*st, [&](Statement& r) {
    std::string id = r.column_text(0);
    if (keep && std::find(keep->begin(), keep->end(), id) != keep->end()) return;
    leased.emplace_back(std::move(id), r.column_optional_text(1).value_or(""));
  });
  if (!read) return read.error();
  for (const auto& [task, device] : leased)
    if (auto r = requeue_lost(task, device, reason); !r) return r.error();
  if (!keep) {
    auto dv = db_.prepare("UPDATE devices SET online = 0 WHERE peer = ?");
    if (!dv) return dv.error();
    if (auto r = dv->bind(1, std::string_view(peer)).run(); !r) return r.error();
  }
  if (auto r = tx->commit(); !r) return r.error();
  return static_cast<int>(leased.size());
}

Result<int> PoolStore::expire_leases(std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  // Only the leases past their deadline: not every lease, four times a second.
  auto st = db_.prepare("SELECT id, device, lease_deadline FROM tasks WHERE state = 'leased' AND lease_deadline <= ?");
  if (!st) return st.error();
  st->bind(1, now_ms);
  std::vector<std::pair<std::string, std::string>> expired;
  auto read = for_each_row(*st, [&](Statement& r) {
    TimePoint deadline{std::chrono::milliseconds(r.column_int64(2))};
    if (lease_expired(deadline, TimePoint{std::chrono::milliseconds(now_ms)}))
      expired.emplace_back(r.column_text(0), r.column_optional_text(1).value_or(""));
  });
  if (!read) return read.error();
  for (const auto& [task, device] : expired)
    if (auto r = requeue_lost(task, device, "lease expired"); !r) return r.error();
  if (auto r = tx->commit(); !r) return r.error();
  return static_cast<int>(expired.size());
}

}  // namespace runsnack::pool
