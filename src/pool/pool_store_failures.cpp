// PoolStore: shards whose command exited non-zero. Exit status is a result:
// the attempt is recorded with its exit code and stderr's tail, never paid,
// and the shard runs again elsewhere while the job's --retries allow (a
// report that does not count, PoolStore::failure_counts, spends none).
#include "pool/pool_store.hpp"

namespace runsnack::pool {

namespace {
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  return line;
}
}  // namespace

Result<FailOutcome> PoolStore::shard_failed(const std::string& task, std::int64_t attempt, const std::string& peer,
                                            std::int64_t exit_code, const std::string& stderr_tail, bool final,
                                            std::int64_t now_ms) {
  FailOutcome out;
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto st = db_.prepare(
      "SELECT t.job, t.shard, t.attempts, t.exit_failures, j.retries, j.allow_failures, j.shards, "
      "(SELECT c.of_shard FROM copies c WHERE c.task = t.id), COALESCE(t.device, '') FROM tasks t "
      "JOIN jobs j ON j.id = t.job "
      "WHERE t.id = ? AND t.state = 'leased' AND t.worker = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(task)).bind(2, std::string_view(peer));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_int64(2) != attempt) return out;  // not this peer's live lease: nothing to record
  const std::string job = st->column_text(0);
  const std::int64_t shard = st->column_optional_int64(7).value_or(st->column_int64(1));  // a copy runs its original shard
  const std::int64_t failures = st->column_int64(3) + 1, retries = st->column_int64(4);
  const bool allow_failures = st->column_int64(5) != 0;
  const std::string device = st->column_text(8);
  if (auto more = st->step(); !more) return more.error();
  out.recorded = true;
  // A fresh identity's word runs the shard elsewhere without spending a retry
  // while a device with a record can check it (failure_counts).
  auto counts = failure_counts(task, device, peer);
  if (!counts) return counts.error();

  auto ins = db_.prepare(
      "INSERT INTO failures (task, job, shard, attempt, peer, exit_code, stderr, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  if (!ins) return ins.error();
  ins->bind(1, std::string_view(task)).bind(2, std::string_view(job)).bind(3, shard).bind(4, attempt);
  ins->bind(5, std::string_view(peer)).bind(6, exit_code);
  ins->bind_blob(7, {reinterpret_cast<const std::uint8_t*>(stderr_tail.data()), stderr_tail.size()}).bind(8, now_ms);
  if (auto r = ins->run(); !r) return r.error();

  const std::string why = "exit code " + std::to_string(exit_code) + (stderr_tail.empty() ? "" : ": " + first_line(stderr_tail));
  if (!final && (failures <= retries || !*counts)) {
    // Elsewhere: never again on this peer.
    if (auto r = avoid_peer(task, peer, "its run exited non-zero", now_ms); !r) return r.error();
    auto up = db_.prepare(
        "UPDATE tasks SET state = 'pending', worker = NULL, device = NULL, lease_deadline = NULL, last_error = ?, "
        "exit_failures = exit_failures + ? WHERE id = ?");
    if (!up) return up.error();
    up->bind(1, std::string_view(why)).bind(2, std::int64_t{*counts ? 1 : 0}).bind(3, std::string_view(task));
    if (auto r = up->run(); !r) return r.error();
    out.retried = true;
    if (auto r = tx->commit(); !r) return r.error();
    return out;
  }
  auto up = db_.prepare("UPDATE tasks SET state = 'failed', last_error = ?, exit_failures = exit_failures + 1 WHERE id = ?");
  if (!up) return up.error();
  if (auto r = up->bind(1, std::string_view(why)).bind(2, std::string_view(task)).run(); !r) return r.error();
  if (allow_failures) {
    auto finished = maybe_finish(job, now_ms);
    if (!finished) return finished.error();
    out.job_finished = *finished;
  } else {
    if (auto r = finish_job(job, "failed", "shard " + std::to_string(shard) + " failed with " + why, now_ms); !r)
      return r.error();
    out.job_finished = true;
  }
  if (auto r = tx->commit(); !r) return r.error();
  return out;
}

Result<std::vector<ShardFailure>> PoolStore::failures(const std::string& job, std::int64_t limit) {
  auto st = db_.prepare(
      "SELECT shard, attempt, exit_code, time, peer, stderr FROM failures WHERE job = ? ORDER BY time, shard LIMIT ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job)).bind(2, limit);
  return read_rows(*st, [](Statement& r) {
    ShardFailure f;
    f.shard = r.column_int64(0), f.attempt = r.column_int64(1), f.exit_code = r.column_int64(2);
    f.time_ms = r.column_int64(3), f.peer = r.column_text(4);
    auto blob = r.column_blob(5);
    f.stderr_tail.assign(blob.begin(), blob.end());
    return f;
  });
}

Result<void> PoolStore::record_unverified(const std::string& job) {
  auto st = db_.prepare("UPDATE jobs SET unverified = unverified + 1 WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, std::string_view(job)).run();
}

}  // namespace runsnack::pool
