#include "store/migrate.hpp"

#include <algorithm>
#include <string>

namespace runsnack {
namespace {

Result<void> ensure_version_table(Database& db) {
  return db.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL) STRICT");
}

Result<void> set_version(Database& db, int version) {
  if (auto r = db.exec("DELETE FROM schema_version"); !r) return r.error();
  auto stmt = db.prepare("INSERT INTO schema_version (version) VALUES (?1)");
  if (!stmt) return stmt.error();
  return stmt->bind(1, std::int64_t{version}).run();
}

Result<int> migrate_postgres(Database& db, std::span<const Migration> migrations) {
  auto tx = Transaction::begin(db);
  if (!tx) return tx.error();
  if (auto r = db.exec("CREATE TABLE IF NOT EXISTS pool_schema_version (version INTEGER NOT NULL)"); !r)
    return r.error();
  auto st = db.prepare("SELECT COALESCE(MAX(version), 0) FROM pool_schema_version");
  if (!st) return st.error();
  if (auto row = st->step(); !row) return row.error();
  const std::int64_t version = st->column_int64(0);
  int newest = 0;
  for (const auto& m : migrations) {
    newest = m.version;
    if (m.version <= version) continue;
    if (auto r = db.exec(m.sql); !r) return r.error();
    if (auto r = db.exec("INSERT INTO pool_schema_version (version) VALUES (" + std::to_string(m.version) + ")"); !r)
      return r.error();
  }
  if (version > newest)
    return fail(errc::unsupported, "the pool database is at schema version " + std::to_string(version) +
                                       ", newer than this RunSnack knows");
  if (auto r = tx->commit(); !r) return r.error();
  return static_cast<int>(std::max<std::int64_t>(version, newest));
}

}  // namespace

Result<int> schema_version(Database& db) {
  if (auto r = ensure_version_table(db); !r) return r.error();
  auto stmt = db.prepare("SELECT max(version) FROM schema_version");
  if (!stmt) return stmt.error();
  auto row = stmt->step();
  if (!row) return row.error();
  return static_cast<int>(stmt->column_optional_int64(0).value_or(0));
}

Result<int> migrate(Database& db, std::span<const Migration> migrations) {
  if (db.postgres()) return migrate_postgres(db, migrations);
  int latest = migrations.empty() ? 0 : migrations.back().version;
  for (const Migration& m : migrations) {
    // Re-read the version inside the write lock: another process may have
    // applied this migration while we waited for it.
    auto tx = Transaction::begin(db);
    if (!tx) return tx.error();
    auto current = schema_version(db);
    if (!current) return current.error();
    if (*current > latest)
      return fail(errc::unsupported, "database schema version " + std::to_string(*current) +
                                         " is newer than this RunSnack understands (" +
                                         std::to_string(latest) + "); upgrade RunSnack");
    if (m.version <= *current) continue;  // the transaction rolls back, nothing was written
    if (auto r = db.exec(m.sql); !r)
      return Error(r.error().code,
                   "migration " + std::to_string(m.version) + " failed: " + r.error().message);
    if (auto r = set_version(db, m.version); !r) return r.error();
    if (auto r = tx->commit(); !r) return r.error();
  }
  return schema_version(db);
}

}  // namespace runsnack
