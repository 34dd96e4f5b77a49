#include "store/database.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "store/schema.hpp"

namespace runsnack {
namespace {

errc code_for(int rc) {
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

}  // namespace

Error sqlite_error(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  return Error(code_for(rc), std::move(message));
}

void Database::Closer::operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }

Database::~Database() = default;

Result<Database> Database::open(const std::filesystem::path& path, unsigned file_mode) {
  auto db = open_unmigrated(path, file_mode);
  if (!db) return db.error();
  if (auto v = migrate(*db, store_migrations()); !v) return v.error();
  return std::move(*db);
}

Result<Database> Database::open_unmigrated(const std::filesystem::path& path, unsigned file_mode) {
  std::string name = is_memory_path(path) ? std::string(":memory:") : path.string();
  if (!is_memory_path(path)) {
    if (auto made = create_private_file(path, file_mode); !made) return made.error();
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  Database db(raw);  // owns the handle even when open failed
  if (rc != SQLITE_OK) return sqlite_error(raw, rc, "cannot open database " + name);
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kSqliteBusyTimeoutMs);
  // WAL reports "memory" for an in-memory database, which is fine.
  if (auto r = db.exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"); !r)
    return Error(r.error().code, "cannot set up database " + name + ": " + r.error().message);
  return db;
}

Result<void> Database::exec(std::string_view sql) {
  std::string text(sql);  // sqlite3_exec needs a terminated string
  char* message = nullptr;
  int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &message);
  if (rc == SQLITE_OK) return {};
  std::string detail = message ? message : sqlite3_errstr(rc);
  sqlite3_free(message);
  return Error(code_for(rc), "sqlite: " + detail);
}

Result<Statement> Database::prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_.get(), sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return sqlite_error(db_.get(), rc, "cannot prepare statement");
  }
  return Statement(stmt);
}

std::int64_t Database::changes() const { return sqlite3_changes64(db_.get()); }

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }

// --- Statement ---

void Statement::Finalizer::operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }

Statement::~Statement() = default;

void Statement::note_bind(int rc, int index) {
  if (rc != SQLITE_OK && !bind_error_)
    bind_error_ =
        sqlite_error(sqlite3_db_handle(stmt_.get()), rc, "cannot bind parameter " + std::to_string(index));
}

Statement& Statement::bind(int index, std::int64_t value) {
  note_bind(sqlite3_bind_int64(stmt_.get(), index, value), index);
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies, so the caller's buffer may go away.
  note_bind(sqlite3_bind_text64(stmt_.get(), index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
            index);
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::uint8_t> bytes) {
  note_bind(sqlite3_bind_blob64(stmt_.get(), index, bytes.data(), bytes.size(), SQLITE_TRANSIENT), index);
  return *this;
}

Statement& Statement::bind_null(int index) {
  note_bind(sqlite3_bind_null(stmt_.get(), index), index);
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& value) {
  return value ? bind(index, *value) : bind_null(index);
}

Statement& Statement::bind(int index, const std::optional<std::string>& text) {
  return text ? bind(index, std::string_view(*text)) : bind_null(index);
}

Result<bool> Statement::step() {
  if (bind_error_) return *bind_error_;
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Error e = sqlite_error(sqlite3_db_handle(stmt_.get()), rc, "sqlite");
  sqlite3_reset(stmt_.get());
  return e;
}

Result<void> Statement::run() {
  for (;;) {
    auto row = step();
    if (!row) return row.error();
    if (!*row) return {};
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  bind_error_.reset();
}

bool Statement::column_is_null(int column) const {
  return sqlite3_column_type(stmt_.get(), column) == SQLITE_NULL;
}

std::int64_t Statement::column_int64(int column) const { return sqlite3_column_int64(stmt_.get(), column); }

std::string Statement::column_text(int column) const {
  const auto* text = sqlite3_column_text(stmt_.get(), column);
  if (!text) return {};
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<std::size_t>(sqlite3_column_bytes(stmt_.get(), column)));
}

std::vector<std::uint8_t> Statement::column_blob(int column) const {
  const auto* data = static_cast<const std::uint8_t*>(sqlite3_column_blob(stmt_.get(), column));
  if (!data) return {};
  return std::vector<std::uint8_t>(data, data + sqlite3_column_bytes(stmt_.get(), column));
}

std::optional<std::int64_t> Statement::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_int64(column);
}

std::optional<std::string> Statement::column_optional_text(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_text(column);
}

// --- Transaction ---

Result<Transaction> Transaction::begin(Database& db) {
  int rc = sqlite3_exec(db.handle(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db.handle(), rc, "cannot begin transaction");
  return Transaction(db.handle());
}

Result<void> Transaction::commit() {
  if (!db_) return fail(errc::internal, "transaction already finished");
  int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return sqlite_error(db_, rc, "cannot commit");  // the destructor rolls back
  db_ = nullptr;
  return {};
}

Transaction::~Transaction() {
  // Only when still inside the transaction: a failed COMMIT may already have ended it.
  if (db_ && !sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace runsnack
