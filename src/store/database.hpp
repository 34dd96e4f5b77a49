#pragma once
// The one database seam (docs/ARCHITECTURE.md, "store"): a connection to a
// SQLite file or, through libpq, a PostgreSQL server; prepared statements
// with SQLite's `?`/`?N` parameters (rewritten to `$N` for PostgreSQL); and a
// transaction guard. The provider's store (grants, audit, sessions) uses it
// on SQLite, the pool store (pool/pool_store.hpp) on either. Nothing throws
// through it: every failure comes back as a Result error carrying the
// engine's message.
//
// SQLite sharing: a provider process and a `runsnack revoke` process open the
// same file, so connections use WAL (readers do not block the writer) and a
// busy timeout (a writer waits for the other's write to finish instead of
// failing at once). Writes that read first run in a Transaction, which takes
// the write lock up front (BEGIN IMMEDIATE) and so cannot deadlock on upgrade.
//
// PostgreSQL: a Transaction is BEGIN plus a transaction-scoped advisory lock,
// exclusive by default (read-then-write sequences serialize across processes
// exactly as on SQLite), shared for claims, which then run concurrently and
// pick rows with FOR UPDATE SKIP LOCKED. Statements are prepared on the server
// once per connection (by their text and parameter types) and then only
// executed: a repeated statement is not parsed and planned again, and each
// step() of a new execution is one round trip.
//
// Thread-safety: a Database and its Statements are used from one thread at a
// time (SQLite is opened without its own mutex). Use one Database per thread
// or serialize access, e.g. on a strand.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "core/paths.hpp"

struct sqlite3_stmt;
struct pg_result;

namespace runsnack {

// How long a SQLite connection waits for another process's lock before SQLITE_BUSY.
inline constexpr int kSqliteBusyTimeoutMs = 5000;

struct Migration;      // store/migrate.hpp
struct DbConnection;   // the engine's handle behind a Database (store/db_connection.hpp)
class Statement;
class Transaction;

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
  // The same, with another schema's `migrations` (store/migrate.hpp).
  static Result<Database> open_sqlite(const std::filesystem::path& path, std::span<const Migration> migrations,
                                      unsigned file_mode = shared_file_mode());
  // The same connection without any schema (for tests of migrations).
  static Result<Database> open_unmigrated(const std::filesystem::path& path, unsigned file_mode = shared_file_mode());
  // `url`: postgres://... or postgresql://... (libpq connection URI); applies
  // `migrations` under the exclusive lock, so two processes starting together
  // apply each exactly once.
  static Result<Database> open_postgres(const std::string& url, std::span<const Migration> migrations);

  Database(Database&&) noexcept;
  Database& operator=(Database&&) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;
  ~Database();

  bool postgres() const;
  // Runs one or more statements that return no rows.
  Result<void> exec(std::string_view sql);
  // Compiles one statement; the Statement must not outlive this Database
  // (it may outlive a move of it).
  Result<Statement> prepare(std::string_view sql);

  // SQLite only (0 on PostgreSQL): rows changed by the last
  // INSERT/UPDATE/DELETE on this connection, and the last rowid inserted.
  std::int64_t changes() const;
  std::int64_t last_insert_rowid() const;

 private:
  friend class Transaction;
  explicit Database(std::unique_ptr<DbConnection> conn);
  std::unique_ptr<DbConnection> conn_;  // on the heap: statements and transactions keep a pointer across moves
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
  Statement() = default;
  struct Finalizer {
    void operator()(sqlite3_stmt* stmt) const noexcept;
  };
  struct ResultClear {
    void operator()(pg_result* res) const noexcept;
  };
  struct PgParam {
    std::optional<std::string> value;
    unsigned type = 0;  // PostgreSQL type OID, 0: let the server infer
    bool binary = false;
  };
  void note_bind(int rc, int index);
  void set_pg(int index, PgParam p);
  Result<void> execute_pg();

  // SQLite: the compiled statement (null on PostgreSQL).
  std::unique_ptr<sqlite3_stmt, Finalizer> lite_;
  std::optional<Error> bind_error_;
  // PostgreSQL: text and parameters, executed by the first step().
  DbConnection* pg_ = nullptr;
  std::string sql_;
  std::vector<PgParam> params_;
  std::unique_ptr<pg_result, ResultClear> res_;
  int row_ = -1, rows_ = 0;
  bool executed_ = false;
};

// A transaction guard: begun on construction (see the top of this file for
// what each engine locks), rolled back on destruction unless commit()
// succeeded. Begun inside another (a batch of operations), a savepoint: the
// inner part commits or undoes on its own under the outer one's lock.
class Transaction {
 public:
  enum class Lock { exclusive, shared };  // shared: claims on PostgreSQL; the same as exclusive on SQLite
  static Result<Transaction> begin(Database& db, Lock lock = Lock::exclusive);

  // The transaction keeps the connection, so the Database may be moved (not
  // destroyed) while it is open.
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  ~Transaction();

  Result<void> commit();

 private:
  Transaction() = default;
  DbConnection* conn_ = nullptr;  // null once moved from
  bool open_ = false;             // outermost: not yet committed or rolled back
  int savepoint_ = 0;             // nested: its savepoint's number until released
};

// Steps `st` through its rows, calling `on_row(st)` to read each one's
// columns: the loop every query of several rows needs, written once. An
// `on_row` that returns Result<void> stops the loop with its error.
template <class OnRow>
Result<void> for_each_row(Statement& st, OnRow&& on_row) {
  while (true) {
    auto row = st.step();
    if (!row) return row.error();
    if (!*row) return {};
    if constexpr (std::is_void_v<std::invoke_result_t<OnRow&, Statement&>>) {
      on_row(st);
    } else if (auto r = on_row(st); !r) {
      return r.error();
    }
  }
}

// Every row, as `read(st)` makes it of the row's columns.
template <class Read, class Row = std::decay_t<std::invoke_result_t<Read&, Statement&>>>
Result<std::vector<Row>> read_rows(Statement& st, Read&& read) {
  std::vector<Row> out;
  if (auto r = for_each_row(st, [&](Statement& s) { out.push_back(read(s)); }); !r) return r.error();
  return out;
}

}  // namespace runsnack
