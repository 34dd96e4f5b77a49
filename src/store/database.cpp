// Database and Transaction (store/database.hpp) for both engines; statements
// are in statement.cpp, the libpq specifics in postgres.cpp.
#include "store/database.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "store/db_connection.hpp"
#include "store/libpq.hpp"
#include "store/migrate.hpp"
#include "store/schema.hpp"

namespace runsnack {
namespace {

// The advisory lock key every process on one PostgreSQL database shares.
constexpr const char* kLockKey = "7262001";

bool is_memory_path(const std::filesystem::path& path) { return path.empty() || path == ":memory:"; }

// Creates the file ourselves so it has `mode` from its first byte; SQLite
// would create it with the umask's mode, and its -wal and -shm files copy the
// main file's mode, so fixing the main file fixes all three. Another user's
// file (the machine's state, shared through its group) is left as it is.
Result<void> create_private_file(const std::filesystem::path& path, unsigned mode) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return fail(errc::io_error, "cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  int rc = ::fstat(fd, &st);
  if (rc == 0 && st.st_uid == ::geteuid() && (st.st_mode & 0777) != mode) rc = ::fchmod(fd, mode);
  int err = errno;
  ::close(fd);
  if (rc != 0) return fail(errc::io_error, "cannot chmod " + path.string() + ": " + std::strerror(err));
  return {};
}

// Runs `sql` on whichever engine `conn` holds.
Result<void> exec_on(DbConnection& conn, const char* sql) {
  if (!conn.lite) return pg_exec(conn.pg, sql);
  char* message = nullptr;
  int rc = sqlite3_exec(conn.lite, sql, nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  std::string detail = message ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return Error(sqlite_code(rc), "sqlite: " + detail);
}

}  // namespace

errc sqlite_code(int rc) {
  switch (rc & 0xff) {  // the primary code; extended codes refine it
    case SQLITE_CONSTRAINT:
      return errc::invalid_argument;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return errc::timeout;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return errc::malformed;
    case SQLITE_TOOBIG:
      return errc::too_large;
    default:
      return errc::io_error;
  }
}

Error sqlite_error(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Error(sqlite_code(rc), std::move(message));
}

DbConnection::~DbConnection() {
  if (lite) sqlite3_close_v2(lite);
  if (pg) libpq().finish(pg);
}

// --- Database ---

Database::Database(std::unique_ptr<DbConnection> conn) : conn_(std::move(conn)) {}
Database::Database(Database&&) noexcept = default;
Database& Database::operator=(Database&&) noexcept = default;
Database::~Database() = default;

Result<Database> Database::open(const std::filesystem::path& path, unsigned file_mode) {
  return open_sqlite(path, store_migrations(), file_mode);
}

Result<Database> Database::open_sqlite(const std::filesystem::path& path, std::span<const Migration> migrations,
                                       unsigned file_mode) {
  auto db = open_unmigrated(path, file_mode);
  if (!db) return db.error();
  if (auto v = migrate(*db, migrations); !v) return v.error();
  return std::move(*db);
}

Result<Database> Database::open_unmigrated(const std::filesystem::path& path, unsigned file_mode) {
  std::string name = is_memory_path(path) ? std::string(":memory:") : path.string();
  if (!is_memory_path(path)) {
    if (auto made = create_private_file(path, file_mode); !made) return made.error();
  }
  auto conn = std::make_unique<DbConnection>();
  // The handle is owned (and closed) even when open failed.
  int rc = sqlite3_open_v2(name.c_str(), &conn->lite,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(conn->lite, rc, "cannot open database " + name);
  sqlite3_extended_result_codes(conn->lite, 1);
  sqlite3_busy_timeout(conn->lite, kSqliteBusyTimeoutMs);
  // WAL reports "memory" for an in-memory database, which is fine.
  if (auto r = exec_on(*conn, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"); !r)
    return Error(r.error().code, "cannot set up database " + name + ": " + r.error().message);
  return Database(std::move(conn));
}

Result<Database> Database::open_postgres(const std::string& url, std::span<const Migration> migrations) {
  auto conn = pg_connect(url);
  if (!conn) return conn.error();
  Database db(std::move(*conn));
  if (auto v = migrate(db, migrations); !v) return v.error();
  return db;
}

bool Database::postgres() const { return conn_->pg != nullptr; }

Result<void> Database::exec(std::string_view sql) {
  return exec_on(*conn_, std::string(sql).c_str());  // both engines need a terminated string
}

Result<Statement> Database::prepare(std::string_view sql) {
  Statement st;
  if (conn_->pg) {
    st.pg_ = conn_.get();
    st.sql_ = to_postgres_params(sql);
    return st;
  }
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(conn_->lite, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  st.lite_.reset(raw);
  if (rc != SQLITE_OK) return sqlite_error(conn_->lite, rc, "cannot prepare statement");
  if (!raw) return fail(errc::invalid_argument, "cannot prepare statement: no SQL in it");
  return st;
}

std::int64_t Database::changes() const { return conn_->lite ? sqlite3_changes64(conn_->lite) : 0; }

std::int64_t Database::last_insert_rowid() const {
  return conn_->lite ? sqlite3_last_insert_rowid(conn_->lite) : 0;
}

// --- Transaction ---

Result<Transaction> Transaction::begin(Database& db, Lock lock) {
  DbConnection& conn = *db.conn_;
  Transaction tx;
  if (conn.depth > 0) {
    // Inside a batch: a savepoint, so this part commits or undoes on its own
    // while the batch commits once. The batch took the lock it needs.
    if (auto r = exec_on(conn, ("SAVEPOINT s" + std::to_string(conn.depth + 1)).c_str()); !r) return r.error();
    tx.savepoint_ = ++conn.depth;
    tx.conn_ = &conn;
    return tx;
  }
  ++conn.depth;
  tx.conn_ = &conn;  // from here on the guard rolls back and counts the depth down
  tx.open_ = true;
  if (conn.lite) {
    int rc = sqlite3_exec(conn.lite, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return sqlite_error(conn.lite, rc, "cannot begin transaction");
    return tx;
  }
  // One round trip for both (a simple query may hold several statements).
  std::string begin = std::string("BEGIN; SELECT pg_advisory_xact_lock") +
                      (lock == Lock::shared ? "_shared(" : "(") + kLockKey + ")";
  if (auto r = pg_exec(conn.pg, begin.c_str()); !r) return r.error();
  return tx;
}

Transaction::Transaction(Transaction&& o) noexcept
    : conn_(std::exchange(o.conn_, nullptr)), open_(std::exchange(o.open_, false)),
      savepoint_(std::exchange(o.savepoint_, 0)) {}

Result<void> Transaction::commit() {
  if (savepoint_) {
    int n = std::exchange(savepoint_, 0);
    return exec_on(*conn_, ("RELEASE s" + std::to_string(n)).c_str());
  }
  if (!conn_ || !open_) return fail(errc::internal, "transaction already finished");
  if (conn_->lite) {
    int rc = sqlite3_exec(conn_->lite, "COMMIT", nullptr, nullptr, nullptr);
    if (rc != SQLITE_OK) return sqlite_error(conn_->lite, rc, "cannot commit");  // the destructor rolls back
    open_ = false;
    return {};
  }
  open_ = false;  // a failed COMMIT ends PostgreSQL's transaction too
  PGresult* res = libpq().exec(conn_->pg, "COMMIT");
  auto r = pg_check(conn_->pg, res, "postgres COMMIT");
  libpq().clear(res);
  return r;
}

Transaction::~Transaction() {
  if (!conn_) return;
  if (savepoint_) {  // a nested scope that did not commit: undo just its part
    std::string name = "s" + std::to_string(savepoint_);
    (void)exec_on(*conn_, ("ROLLBACK TO " + name + "; RELEASE " + name).c_str());
  } else if (open_ && conn_->lite) {
    // Only when still inside the transaction: a failed COMMIT may already have ended it.
    if (!sqlite3_get_autocommit(conn_->lite)) sqlite3_exec(conn_->lite, "ROLLBACK", nullptr, nullptr, nullptr);
  } else if (open_) {
    libpq().clear(libpq().exec(conn_->pg, "ROLLBACK"));
  }
  --conn_->depth;
}

}  // namespace runsnack
