#include "pool/sql.hpp"

#include "pool/libpq.hpp"

#include <cstdlib>
#include <unordered_map>
#include <utility>

namespace runsnack::pool {

// Server-side prepared statements of one connection: statement text plus
// parameter types -> name. Bounded: past the cap (statements whose text is
// made per call, e.g. a batch's VALUES list of one length) they run unprepared.
struct PgPrepared {
  static constexpr std::size_t kMax = 512;
  std::unordered_map<std::string, std::string> names;
};
namespace {

constexpr unsigned kInt8Oid = 20, kTextOid = 25, kByteaOid = 17;
// The advisory lock key every pool coordinator on one database shares.
constexpr const char* kLockKey = "7262001";

Error pg_error(pg_conn* conn, std::string_view what) {
  std::string msg = conn ? libpq().error_message(conn) : "out of memory";
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return fail(errc::io_error, std::string(what) + ": " + msg);
}

Result<void> check(pg_conn* conn, PGresult* res, std::string_view what) {
  auto st = libpq().result_status(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return {};
  std::string msg = res ? libpq().result_error_message(res) : libpq().error_message(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return fail(errc::io_error, std::string(what) + ": " + msg);
}

}  // namespace

std::string to_postgres_params(std::string_view sql) {
  std::string out;
  int next = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (c == '\'') quoted = !quoted;
    if (quoted || c != '?') {
      out += c;
      continue;
    }
    std::size_t j = i + 1;
    while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') ++j;
    if (j > i + 1) {
      out += '$';
      out.append(sql.substr(i + 1, j - i - 1));
      i = j - 1;
    } else {
      out += '$' + std::to_string(++next);
    }
  }
  return out;
}

// --- statements ----------------------------------------------------------------

SqlStmt::SqlStmt(SqlStmt&& o) noexcept
    : lite_(std::move(o.lite_)), conn_(o.conn_), prepared_(o.prepared_), sql_(std::move(o.sql_)), params_(std::move(o.params_)),
      res_(std::exchange(o.res_, nullptr)), row_(o.row_), rows_(o.rows_), executed_(o.executed_) {}

SqlStmt& SqlStmt::operator=(SqlStmt&& o) noexcept {
  if (this != &o) {
    if (res_) libpq().clear(res_);
    lite_ = std::move(o.lite_), conn_ = o.conn_, prepared_ = o.prepared_, sql_ = std::move(o.sql_), params_ = std::move(o.params_);
    res_ = std::exchange(o.res_, nullptr), row_ = o.row_, rows_ = o.rows_, executed_ = o.executed_;
  }
  return *this;
}

SqlStmt::~SqlStmt() {
  if (res_) libpq().clear(res_);
}

void SqlStmt::set(int index, Param p) {
  if (index < 1) return;
  if (params_.size() < static_cast<std::size_t>(index)) params_.resize(static_cast<std::size_t>(index));
  params_[static_cast<std::size_t>(index - 1)] = std::move(p);
}

SqlStmt& SqlStmt::bind(int index, std::int64_t value) {
  if (lite_) lite_->bind(index, value);
  else set(index, {std::to_string(value), kInt8Oid, false});
  return *this;
}

SqlStmt& SqlStmt::bind(int index, std::string_view text) {
  if (lite_) lite_->bind(index, text);
  else set(index, {std::string(text), kTextOid, false});
  return *this;
}

SqlStmt& SqlStmt::bind(int index, const std::optional<std::string>& text) {
  if (lite_) lite_->bind(index, text);
  else set(index, {text, kTextOid, false});
  return *this;
}

SqlStmt& SqlStmt::bind(int index, const std::optional<std::int64_t>& value) {
  if (lite_) lite_->bind(index, value);
  else set(index, {value ? std::optional<std::string>(std::to_string(*value)) : std::nullopt, kInt8Oid, false});
  return *this;
}

SqlStmt& SqlStmt::bind_blob(int index, std::span<const std::uint8_t> bytes) {
  if (lite_) lite_->bind_blob(index, bytes);
  else set(index, {std::string(bytes.begin(), bytes.end()), kByteaOid, true});
  return *this;
}

SqlStmt& SqlStmt::bind_null(int index) {
  if (lite_) lite_->bind_null(index);
  else set(index, {std::nullopt, 0, false});
  return *this;
}

Result<bool> SqlStmt::step() {
  if (lite_) return lite_->step();
  if (!executed_) {
    executed_ = true;
    std::vector<Oid> types;
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (const auto& p : params_) {
      types.push_back(p.type);
      values.push_back(p.value ? p.value->data() : nullptr);
      lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
      formats.push_back(p.binary ? 1 : 0);
    }
    const int n = static_cast<int>(params_.size());
    std::string key = sql_;
    key += '\0';
    for (Oid t : types) key.append(std::to_string(t)).push_back(',');
    const std::string* name = nullptr;
    if (prepared_) {
      if (auto it = prepared_->names.find(key); it != prepared_->names.end()) {
        name = &it->second;
      } else if (prepared_->names.size() < PgPrepared::kMax) {
        std::string fresh = "rs" + std::to_string(prepared_->names.size());
        PGresult* made = libpq().prepare(conn_, fresh.c_str(), sql_.c_str(), n, types.data());
        auto ok = check(conn_, made, "postgres");
        libpq().clear(made);
        if (!ok) return ok.error();
        name = &prepared_->names.emplace(std::move(key), std::move(fresh)).first->second;
      }
    }
    res_ = name ? libpq().exec_prepared(conn_, name->c_str(), n, values.data(), lengths.data(), formats.data(), 0)
                : libpq().exec_params(conn_, sql_.c_str(), n, types.data(), values.data(), lengths.data(),
                                      formats.data(), 0);
    if (auto r = check(conn_, res_, "postgres"); !r) return r.error();
    rows_ = libpq().result_status(res_) == PGRES_TUPLES_OK ? libpq().ntuples(res_) : 0;
  }
  if (row_ < rows_) ++row_;
  return row_ < rows_;
}

Result<void> SqlStmt::run() {
  if (lite_) return lite_->run();
  while (true) {
    auto r = step();
    if (!r) return r.error();
    if (!*r) return {};
  }
}

void SqlStmt::reset() {
  if (lite_) return lite_->reset();
  if (res_) libpq().clear(std::exchange(res_, nullptr));
  executed_ = false, row_ = -1, rows_ = 0;
}

bool SqlStmt::column_is_null(int column) const {
  if (lite_) return lite_->column_is_null(column);
  return !res_ || row_ >= rows_ || libpq().getisnull(res_, row_, column);
}

std::int64_t SqlStmt::column_int64(int column) const {
  if (lite_) return lite_->column_int64(column);
  if (column_is_null(column)) return 0;
  return std::strtoll(libpq().getvalue(res_, row_, column), nullptr, 10);
}

std::string SqlStmt::column_text(int column) const {
  if (lite_) return lite_->column_text(column);
  if (column_is_null(column)) return {};
  return {libpq().getvalue(res_, row_, column), static_cast<std::size_t>(libpq().getlength(res_, row_, column))};
}

std::vector<std::uint8_t> SqlStmt::column_blob(int column) const {
  if (lite_) return lite_->column_blob(column);
  if (column_is_null(column)) return {};
  std::size_t n = 0;
  const auto* escaped = reinterpret_cast<const unsigned char*>(libpq().getvalue(res_, row_, column));
  unsigned char* raw = libpq().unescape_bytea(escaped, &n);
  if (!raw) return {};
  std::vector<std::uint8_t> out(raw, raw + n);
  libpq().freemem(raw);
  return out;
}

std::optional<std::int64_t> SqlStmt::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_int64(column);
}

std::optional<std::string> SqlStmt::column_optional_text(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_text(column);
}

// --- transactions ----------------------------------------------------------------

SqlTxn::SqlTxn(SqlTxn&& o) noexcept
    : lite_(std::move(o.lite_)), conn_(std::exchange(o.conn_, nullptr)), db_(std::exchange(o.db_, nullptr)),
      savepoint_(std::exchange(o.savepoint_, 0)) {}

SqlTxn::~SqlTxn() {
  if (savepoint_) {  // a nested scope that did not commit: undo just its part
    std::string name = "s" + std::to_string(savepoint_);
    (void)db_->exec_sql("ROLLBACK TO " + name + "; RELEASE " + name);
  } else if (conn_) {
    libpq().clear(libpq().exec(conn_, "ROLLBACK"));
  }
  if (db_) --db_->depth_;
}

Result<void> SqlTxn::commit() {
  if (savepoint_) {
    int n = std::exchange(savepoint_, 0);
    return db_->exec_sql("RELEASE s" + std::to_string(n));
  }
  if (lite_) return lite_->commit();
  pg_conn* conn = std::exchange(conn_, nullptr);
  if (!conn) return fail(errc::internal, "transaction already ended");
  PGresult* res = libpq().exec(conn, "COMMIT");
  auto r = check(conn, res, "postgres COMMIT");
  libpq().clear(res);
  return r;
}

// --- connections ----------------------------------------------------------------

SqlDb::SqlDb(SqlDb&& o) noexcept
    : lite_(std::move(o.lite_)), pg_(std::exchange(o.pg_, nullptr)), prepared_(std::move(o.prepared_)) {}

SqlDb& SqlDb::operator=(SqlDb&& o) noexcept {
  if (this != &o) {
    if (pg_) libpq().finish(pg_);
    lite_ = std::move(o.lite_);
    pg_ = std::exchange(o.pg_, nullptr);
    prepared_ = std::move(o.prepared_);
  }
  return *this;
}

SqlDb::~SqlDb() {
  if (pg_) libpq().finish(pg_);
}

Result<SqlDb> SqlDb::open_sqlite(const std::filesystem::path& path, std::span<const Migration> migrations) {
  auto db = Database::open_unmigrated(path);
  if (!db) return db.error();
  if (auto v = migrate(*db, migrations); !v) return v.error();
  SqlDb out;
  out.lite_.emplace(std::move(*db));
  return out;
}

Result<void> SqlDb::pg_exec(const std::string& sql) {
  PGresult* res = libpq().exec(pg_, sql.c_str());
  auto r = check(pg_, res, "postgres");
  libpq().clear(res);
  return r;
}

Result<SqlDb> SqlDb::open_postgres(const std::string& url, std::span<const Migration> migrations) {
  if (auto loaded = load_libpq(); !loaded) return loaded.error();
  SqlDb out;
  out.pg_ = libpq().connectdb(url.c_str());
  out.prepared_ = std::make_unique<PgPrepared>();
  if (!out.pg_ || libpq().status(out.pg_) != CONNECTION_OK) return pg_error(out.pg_, "cannot connect to PostgreSQL");
  if (auto r = out.pg_exec("SET client_min_messages = warning"); !r) return r.error();
  // Commits do not wait for the WAL flush: each would otherwise cost a disk
  // sync (milliseconds) on the coordinator's one thread. A PostgreSQL crash
  // can then lose the last fraction of a second of commits, each whole
  // (a lease or an accepted result with its payment): those tasks run
  // again; nothing is paid twice or half. A coordinator crash loses nothing.
  // A URL's options=-csynchronous_commit=on takes precedence for those who
  // prefer waiting.
  if (url.find("synchronous_commit") == std::string::npos)
    if (auto r = out.pg_exec("SET synchronous_commit = off"); !r) return r.error();
  // Migrations: one transaction under the exclusive lock, so two coordinators
  // starting together apply each exactly once.
  auto tx = out.begin();
  if (!tx) return tx.error();
  if (auto r = out.pg_exec("CREATE TABLE IF NOT EXISTS pool_schema_version (version INTEGER NOT NULL)"); !r)
    return r.error();
  auto st = out.prepare("SELECT COALESCE(MAX(version), 0) FROM pool_schema_version");
  if (!st) return st.error();
  if (auto row = st->step(); !row) return row.error();
  std::int64_t version = st->column_int64(0);
  int newest = 0;
  for (const auto& m : migrations) {
    newest = m.version;
    if (m.version <= version) continue;
    if (auto r = out.pg_exec(m.sql); !r) return r.error();
    if (auto r = out.pg_exec("INSERT INTO pool_schema_version (version) VALUES (" + std::to_string(m.version) + ")"); !r)
      return r.error();
  }
  if (version > newest)
    return fail(errc::unsupported, "the pool database is at schema version " + std::to_string(version) +
                                       ", newer than this RunSnack knows");
  if (auto r = tx->commit(); !r) return r.error();
  return out;
}

Result<SqlStmt> SqlDb::prepare(std::string_view sql) {
  SqlStmt st;
  if (lite_) {
    auto s = lite_->prepare(sql);
    if (!s) return s.error();
    st.lite_.emplace(std::move(*s));
    return st;
  }
  st.conn_ = pg_;
  st.prepared_ = prepared_.get();
  st.sql_ = to_postgres_params(sql);
  return st;
}

Result<void> SqlDb::exec_sql(const std::string& sql) {
  if (lite_) return lite_->exec(sql);
  return pg_exec(sql);
}

Result<SqlTxn> SqlDb::begin(bool shared) {
  SqlTxn tx;
  if (depth_ > 0) {
    // Inside a batch: a savepoint, so this part commits or undoes on its own
    // while the batch commits once. The batch took the lock it needs.
    if (auto r = exec_sql("SAVEPOINT s" + std::to_string(depth_ + 1)); !r) return r.error();
    tx.savepoint_ = ++depth_;
    tx.db_ = this;
    return tx;
  }
  ++depth_;
  tx.db_ = this;
  if (lite_) {
    auto t = Transaction::begin(*lite_);
    if (!t) return t.error();
    tx.lite_.emplace(std::move(*t));
    return tx;
  }
  // One round trip for both (a simple query may hold several statements).
  tx.conn_ = pg_;  // from here on the guard rolls back
  std::string begin = std::string("BEGIN; SELECT pg_advisory_xact_lock") + (shared ? "_shared(" : "(") + kLockKey + ")";
  if (auto r = pg_exec(begin); !r) return r.error();
  return tx;
}

}  // namespace runsnack::pool
