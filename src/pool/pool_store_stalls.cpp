// PoolStore: what the coordinator's StallWatch (stall_watch.hpp) needs to
// tell a job that waits for a worker from one that no worker may ever serve.
#include "pool/pool_store.hpp"

namespace runsnack::pool {

Result<std::vector<PoolStore::JobLoad>> PoolStore::running_job_loads(std::int64_t limit) {
  auto st = db_.prepare(
      "SELECT j.id, (SELECT COUNT(*) FROM tasks p WHERE p.state = 'pending' AND p.job = j.id), "
      "(SELECT COUNT(*) FROM tasks l WHERE l.state = 'leased' AND l.job = j.id) "
      "FROM jobs j WHERE j.state = 'running' ORDER BY j.created LIMIT ?");
  if (!st) return st.error();
  st->bind(1, limit);
  return read_rows(*st, [](Statement& r) { return JobLoad{r.column_text(0), r.column_int64(1), r.column_int64(2)}; });
}

Result<std::set<std::string>> PoolStore::online_worker_peers() {
  // The devices table, not one coordinator's streams: on a shared PostgreSQL
  // database another coordinator's workers may serve the job.
  auto st = db_.prepare("SELECT DISTINCT peer FROM devices WHERE online = 1 AND excluded IS NULL");
  if (!st) return st.error();
  std::set<std::string> out;
  if (auto r = for_each_row(*st, [&](Statement& p) { out.insert(p.column_text(0)); }); !r) return r.error();
  return out;
}

Result<PoolStore::JobBars> PoolStore::job_bars(const std::string& job, std::int64_t limit) {
  JobBars out;
  auto pending = db_.prepare("SELECT id FROM tasks WHERE state = 'pending' AND job = ? ORDER BY shard LIMIT ?");
  if (!pending) return pending.error();
  pending->bind(1, std::string_view(job)).bind(2, limit);
  std::map<std::string, std::size_t> index;
  auto read_pending = for_each_row(*pending, [&](Statement& r) {
    index.emplace(r.column_text(0), out.pending.size());
    out.pending.push_back({r.column_text(0), {}, ""});
  });
  if (!read_pending) return read_pending.error();
  auto bars = db_.prepare(
      "SELECT x.task, x.peer, x.reason FROM rejections x JOIN tasks t ON t.id = x.task "
      "WHERE t.job = ? AND t.state = 'pending' ORDER BY x.time");
  if (!bars) return bars.error();
  bars->bind(1, std::string_view(job));
  auto read_bars = for_each_row(*bars, [&](Statement& r) {
    auto it = index.find(r.column_text(0));
    if (it == index.end()) return;
    auto& p = out.pending[it->second];
    p.barred.insert(r.column_text(1));
    p.last_reason = r.column_text(2);
  });
  if (!read_bars) return read_bars.error();
  auto leased = db_.prepare("SELECT id FROM tasks WHERE state = 'leased' AND job = ?");
  if (!leased) return leased.error();
  leased->bind(1, std::string_view(job));
  auto read_leased = for_each_row(*leased, [&](Statement& r) { out.leased.push_back(r.column_text(0)); });
  if (!read_leased) return read_leased.error();
  return out;
}

Result<void> PoolStore::give_up_job(const std::string& job, const std::string& reason, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  if (auto r = finish_job(job, "failed", reason, now_ms); !r) return r;
  // Its leases left are results held for a quorum that cannot be decided.
  auto st = db_.prepare("UPDATE tasks SET state = 'failed', last_error = ? WHERE job = ? AND state = 'leased'");
  if (!st) return st.error();
  const std::string why = "job failed: " + reason;  // what a worker still running one is told (its heartbeat)
  if (auto r = st->bind(1, std::string_view(why)).bind(2, std::string_view(job)).run(); !r) return r;
  return tx->commit();
}

}  // namespace runsnack::pool
