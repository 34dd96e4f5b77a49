// PoolStore: copies of a shard for a quorum (exec --replicas /
// --spot-check): extra task rows that run the shard on independent peers.
#include "pool/pool_store.hpp"

namespace runsnack::pool {

Result<std::string> PoolStore::add_copy(const std::string& job, std::int64_t of_shard,
                                        const std::vector<std::string>& avoid_peers, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
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
  return read_rows(*st, [](Statement& r) { return r.column_text(0); });
}

Result<bool> PoolStore::retire_copy(const std::string& task, const std::string& why, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
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
  auto tx = Transaction::begin(db_);
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
