#include "store/audit_log.hpp"

#include <algorithm>
#include <limits>

#include "store/text.hpp"

namespace runsnack {
namespace {

using nlohmann::json;

std::string detail_text(const json& detail) {
  if (detail.is_null()) return "null";
  // `replace` keeps a detail with invalid UTF-8 from throwing.
  std::string text = detail.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > kAuditDetailMaxBytes) return json{{"truncated", true}, {"bytes", text.size()}}.dump();
  return text;
}

constexpr std::string_view kInsertSql =
    "INSERT INTO audit (time, kind, grant_id, peer, address, decision, reason, detail)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";

Result<void> insert(Statement& stmt, const AuditEvent& e) {
  stmt.reset();
  stmt.bind(1, to_unix(e.time))
      .bind(2, std::string_view(bounded_text(e.kind, kAuditFieldMaxBytes)))
      .bind(3, std::string_view(bounded_text(e.grant_id, kAuditFieldMaxBytes)))
      .bind(4, std::string_view(bounded_text(e.peer, kAuditFieldMaxBytes)))
      .bind(5, std::string_view(bounded_text(e.address, kAuditFieldMaxBytes)))
      .bind(6, std::string_view(bounded_text(e.decision, kAuditFieldMaxBytes)))
      .bind(7, std::string_view(bounded_text(e.reason, kAuditReasonMaxBytes)))
      .bind(8, std::string_view(detail_text(e.detail)));
  return stmt.run();
}

}  // namespace

json to_json(const AuditEvent& e) {
  json j;
  to_json(j, e);
  return j;
}

void to_json(json& j, const AuditEvent& e) {
  j = json{{"time", rfc3339(e.time)}, {"kind", e.kind},       {"grant_id", e.grant_id},
           {"peer", e.peer},          {"address", e.address}, {"decision", e.decision},
           {"reason", e.reason},      {"detail", e.detail}};
}

Result<void> AuditLog::append(const AuditEvent& e) {
  auto stmt = db_.prepare(kInsertSql);
  if (!stmt) return stmt.error();
  return insert(*stmt, e);
}

Result<void> AuditLog::append(std::span<const AuditEvent> events) {
  if (events.empty()) return {};
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto stmt = db_.prepare(kInsertSql);
  if (!stmt) return stmt.error();
  for (const auto& e : events)
    if (auto r = insert(*stmt, e); !r) return r;
  return tx->commit();
}

Result<std::vector<AuditEvent>> AuditLog::query(std::optional<TimePoint> since, std::size_t limit) {
  // Newest `limit` first in the inner query, then back to append order.
  auto stmt = db_.prepare(
      "SELECT time, kind, grant_id, peer, address, decision, reason, detail FROM ("
      " SELECT * FROM audit WHERE time >= ?1 ORDER BY seq DESC LIMIT ?2"
      ") ORDER BY seq");
  if (!stmt) return stmt.error();
  constexpr auto kMaxLimit = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  stmt->bind(1, since ? to_unix(*since) : std::numeric_limits<std::int64_t>::min())
      .bind(2, static_cast<std::int64_t>(std::min(limit, kMaxLimit)));
  return read_rows(*stmt, [](Statement& row) {
    AuditEvent e;
    e.time = from_unix(row.column_int64(0));
    e.kind = row.column_text(1);
    e.grant_id = row.column_text(2);
    e.peer = row.column_text(3);
    e.address = row.column_text(4);
    e.decision = row.column_text(5);
    e.reason = row.column_text(6);
    // We wrote it, but a damaged row should not hide the others.
    e.detail = json::parse(row.column_text(7), nullptr, false);
    if (e.detail.is_discarded()) e.detail = nullptr;
    return e;
  });
}

Result<std::int64_t> AuditLog::prune(std::optional<TimePoint> older_than, std::optional<std::int64_t> keep_rows) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  std::int64_t deleted = 0;
  if (older_than) {
    auto stmt = db_.prepare("DELETE FROM audit WHERE time < ?1");
    if (!stmt) return stmt.error();
    stmt->bind(1, to_unix(*older_than));
    if (auto r = stmt->run(); !r) return r.error();
    deleted += db_.changes();
  }
  if (keep_rows) {
    // seq orders the rows: everything at or below the (keep_rows+1)-th newest goes.
    auto stmt = db_.prepare(
        "DELETE FROM audit WHERE seq <= (SELECT seq FROM audit ORDER BY seq DESC LIMIT 1 OFFSET ?1)");
    if (!stmt) return stmt.error();
    stmt->bind(1, std::max<std::int64_t>(*keep_rows, 0));
    if (auto r = stmt->run(); !r) return r.error();
    deleted += db_.changes();
  }
  if (auto r = tx->commit(); !r) return r.error();
  return deleted;
}

Result<std::int64_t> AuditLog::count() {
  auto stmt = db_.prepare("SELECT count(*) FROM audit");
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  return *row ? stmt->column_int64(0) : 0;
}

}  // namespace runsnack
