// PoolStore: the double-entry ledger (pool/ledger_rules.hpp): its
// transactions and entries, the balances kept in step with it, and the
// audit that checks both.
#include "pool/pool_store.hpp"

#include <map>

namespace runsnack::pool {
namespace {

// A row of `SELECT txn, account, amount, kind, task FROM ledger`.
LedgerEntry read_entry(Statement& st) {
  return {st.column_int64(0), st.column_text(1), st.column_int64(2), st.column_text(3), st.column_optional_text(4)};
}

}  // namespace

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
  return read_rows(*st, read_entry);
}

Result<AuditReport> PoolStore::audit() {
  auto st = db_.prepare("SELECT txn, account, amount, kind, task FROM ledger ORDER BY seq");
  if (!st) return st.error();
  auto entries = read_rows(*st, read_entry);
  if (!entries) return entries.error();
  std::map<std::string, std::string> finisher;
  std::map<std::string, PaidTerms> terms;  // results accepted since leases record their terms
  auto ts = db_.prepare(
      "SELECT r.task, r.worker, r.lease_price, r.lease_score, r.lease_start, r.received, r.paid_from, r.paid_to, "
      "t.device FROM results r JOIN tasks t ON t.id = r.task WHERE t.state = 'done'");
  if (!ts) return ts.error();
  auto read_terms = for_each_row(*ts, [&](Statement& r) {
    finisher[r.column_text(0)] = r.column_text(1);
    auto price = r.column_optional_int64(2), score = r.column_optional_int64(3), start = r.column_optional_int64(4);
    if (!price || !score || !start) return;
    PaidTerms t{static_cast<double>(*price) / 1000.0, static_cast<double>(*score),
                std::chrono::milliseconds(r.column_int64(5) - *start), r.column_optional_text(8).value_or(""), {}};
    auto from = r.column_optional_int64(6), to = r.column_optional_int64(7);
    if (from && to) t.run_time = std::chrono::milliseconds(*to - *from), t.paid_span = std::pair{*from, *to};
    terms[r.column_text(0)] = std::move(t);
  });
  if (!read_terms) return read_terms.error();
  AuditReport report = audit_ledger(*entries, finisher, terms);
  // The kept balances must be the ledger's sums.
  std::map<std::string, Micro> sums;
  for (const auto& e : *entries) sums[e.account] += e.amount;
  auto bs = db_.prepare("SELECT account, amount FROM balances");
  if (!bs) return bs.error();
  std::map<std::string, Micro> kept;
  if (auto r = for_each_row(*bs, [&](Statement& b) { kept[b.column_text(0)] = b.column_int64(1); }); !r) return r.error();
  for (const auto& [account, sum] : sums)
    if (kept[account] != sum) {
      report.ok = false;
      report.problems.push_back("balance of " + account + " is kept as " + format_credits(kept[account]) +
                                " but its entries sum to " + format_credits(sum));
    }
  return report;
}

}  // namespace runsnack::pool
