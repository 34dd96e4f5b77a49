// PoolStore: read-only views of jobs and the ledger (pool status, the
// dashboard's pool/pool_snapshot.hpp).
#include "pool/pool_store.hpp"

#include <map>

namespace runsnack::pool {
namespace {

// A row of kJobColumns.
JobStatus read_job(Statement& st) {
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
  return read_rows(*st, read_job);
}

Result<std::vector<JobStatus>> PoolStore::recent_jobs(std::int64_t limit) {
  auto st = db_.prepare(std::string(kJobColumns) + "ORDER BY j.created DESC, j.id DESC LIMIT ?");
  if (!st) return st.error();
  st->bind(1, limit);
  return read_rows(*st, read_job);
}

Result<std::vector<LedgerRecord>> PoolStore::recent_entries(std::int64_t limit) {
  auto st = db_.prepare(
      "SELECT l.txn, x.time, l.account, l.amount, l.kind, l.task, l.job FROM ledger l "
      "JOIN ledger_txns x ON x.id = l.txn ORDER BY l.seq DESC LIMIT ?");
  if (!st) return st.error();
  st->bind(1, limit);
  return read_rows(*st, [](Statement& row) {
    LedgerRecord r;
    r.txn = row.column_int64(0), r.time_ms = row.column_int64(1), r.account = row.column_text(2);
    r.amount = row.column_int64(3), r.kind = row.column_text(4), r.task = row.column_optional_text(5);
    r.job = row.column_text(6);
    return r;
  });
}

Result<LedgerTotals> PoolStore::ledger_totals() {
  auto st = db_.prepare(
      "SELECT kind, COALESCE(SUM(amount), 0) FROM ledger WHERE amount > 0 GROUP BY kind "
      "UNION ALL SELECT 'held', COALESCE(SUM(amount), 0) FROM ledger WHERE account LIKE 'escrow:%'");
  if (!st) return st.error();
  LedgerTotals t;
  const std::map<std::string, Micro*> slots = {{"mint", &t.minted},    {"escrow", &t.escrowed}, {"payment", &t.paid},
                                               {"refund", &t.refunded}, {"held", &t.held}};
  auto read = for_each_row(*st, [&](Statement& r) {
    if (auto it = slots.find(r.column_text(0)); it != slots.end()) *it->second = r.column_int64(1);
  });
  if (!read) return read.error();
  return t;
}

Result<std::map<std::string, Micro>> PoolStore::earnings_by_device() {
  auto st = db_.prepare(
      "SELECT t.device, COALESCE(SUM(l.amount), 0) FROM ledger l JOIN tasks t ON t.id = l.task "
      "WHERE l.kind = 'payment' AND l.amount > 0 AND t.device IS NOT NULL GROUP BY t.device");
  if (!st) return st.error();
  std::map<std::string, Micro> out;
  if (auto r = for_each_row(*st, [&](Statement& row) { out[row.column_text(0)] = row.column_int64(1); }); !r) return r.error();
  return out;
}

}  // namespace runsnack::pool
