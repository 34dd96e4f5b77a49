#pragma once
// A small RAII wrapper over one SQLite connection: the connection, prepared
// statements, and a transaction guard. Nothing throws through it: every
// SQLite failure comes back as a Result error carrying SQLite's message.
//
// Sharing: a provider process and a `runsnack revoke` process open the same
// file, so connections use WAL (readers do not block the writer) and a busy
// timeout (a writer waits for the other's write to finish instead of failing
// at once). Writes that read first should use Transaction (BEGIN IMMEDIATE),
// which takes the write lock up front and so cannot deadlock on upgrade.
//
// Thread-safety: a Database and its Statements are used from one thread at a
// time (the connection is opened without SQLite's own mutex). Use one
// Database per thread or serialize access, e.g. on a strand.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/paths.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace runsnack {

// How long a connection waits for another process's lock before SQLITE_BUSY.
inline constexpr int kSqliteBusyTimeoutMs = 5000;

class Statement;

// A Result error from SQLite's code `rc` and the connection's message.
Error sqlite_error(sqlite3* db, int rc, std::string_view what);

class Database {
 public:
  // Opens (creating if needed) the store database at `path`, or an
  // in-memory one for ":memory:", and brings its schema up to date
  // (store/schema.hpp): what the provider and the CLI use. A new file is
  // created with `file_mode` and an existing one of ours is set to it: 0600,
  // as it holds grant keys, or 0660 in the machine's state, shared with group
  // runsnack (core/paths.hpp). Sets WAL, the busy timeout and foreign keys. Fails with
  // io_error (malformed for a file that is not a database, unsupported for
  // one from a newer RunSnack) and SQLite's message.
  static Result<Database> open(const std::filesystem::path& path, unsigned file_mode = shared_file_mode());
  // The same connection without the store schema (for other schemas and tests).
  static Result<Database> open_unmigrated(const std::filesystem::path& path, unsigned file_mode = shared_file_mode());

  Database(Database&&) noexcept = default;
  Database& operator=(Database&&) noexcept = default;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  // Runs one or more statements that return no rows.
  Result<void> exec(std::string_view sql);
  // Compiles one statement; the Statement must not outlive this Database.
  Result<Statement> prepare(std::string_view sql);

  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  std::int64_t changes() const;
  std::int64_t last_insert_rowid() const;

  sqlite3* handle() const { return db_.get(); }

 private:
  struct Closer {
    void operator()(sqlite3* db) const noexcept;
  };
  explicit Database(sqlite3* db) : db_(db) {}
  std::unique_ptr<sqlite3, Closer> db_;
};

// A prepared statement. Parameters are 1-based, columns 0-based (SQLite's
// convention). A bind failure is remembered and reported by the next step(),
// so call sites can bind in a row without checking each one.
class Statement {
 public:
  Statement(Statement&&) noexcept = default;
  Statement& operator=(Statement&&) noexcept = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  Statement& bind_blob(int index, std::span<const std::uint8_t> bytes);
  Statement& bind_null(int index);
  Statement& bind(int index, const std::optional<std::int64_t>& value);
  Statement& bind(int index, const std::optional<std::string>& text);

  // true: a row is ready to read; false: the statement is done.
  Result<bool> step();
  // Steps to completion, for statements that return no rows.
  Result<void> run();
  // Makes the statement reusable; bindings are kept until rebound.
  void reset();

  bool column_is_null(int column) const;
  std::int64_t column_int64(int column) const;
  std::string column_text(int column) const;
  std::vector<std::uint8_t> column_blob(int column) const;
  std::optional<std::int64_t> column_optional_int64(int column) const;
  std::optional<std::string> column_optional_text(int column) const;

 private:
  friend class Database;
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const noexcept;
  };
  explicit Statement(sqlite3_stmt* stmt) : stmt_(stmt) {}
  void note_bind(int rc, int index);

  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  std::optional<Error> bind_error_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit()
// succeeded. Holding the write lock from the start means a read-then-write
// sequence cannot lose a race to another process between the two.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db);

  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  // The transaction keeps the raw connection, so the Database may be moved
  // (not destroyed) while it is open.
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Result<void> commit();

 private:
  explicit Transaction(sqlite3* db) : db_(db) {}
  sqlite3* db_;  // null once committed, rolled back or moved from
};

}  // namespace runsnack
