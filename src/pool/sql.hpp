#pragma once
// The pool store's one seam between SQL engines: a connection (SQLite file or
// PostgreSQL server by libpq), statements with SQLite's `?`/`?N` parameters
// (rewritten to `$N` for PostgreSQL) and a transaction guard.
//
// Transactions: on SQLite, BEGIN IMMEDIATE (the file's write lock). On
// PostgreSQL, BEGIN plus a transaction-scoped advisory lock: exclusive for
// ledger/lifecycle writes (so read-then-write sequences serialize across
// coordinator processes exactly as on SQLite), shared for task claims, which
// then run concurrently and pick rows with FOR UPDATE SKIP LOCKED.
//
// PostgreSQL statements are prepared on the server once per connection (by
// their text and parameter types) and then only executed: a repeated
// statement is not parsed and planned again.
//
// Thread-safety: one thread at a time per SqlDb and its statements.

#include "core/error.hpp"
#include "store/database.hpp"
#include "store/migrate.hpp"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

struct pg_conn;
struct pg_result;

namespace runsnack::pool {

class SqlDb;
struct PgPrepared;

class SqlStmt {
 public:
  SqlStmt(SqlStmt&&) noexcept;
  SqlStmt& operator=(SqlStmt&&) noexcept;
  ~SqlStmt();

  SqlStmt& bind(int index, std::int64_t value);
  SqlStmt& bind(int index, std::string_view text);
  SqlStmt& bind(int index, const char* text) { return bind(index, std::string_view(text)); }
  SqlStmt& bind(int index, const std::optional<std::string>& text);
  SqlStmt& bind(int index, const std::optional<std::int64_t>& value);
  SqlStmt& bind_blob(int index, std::span<const std::uint8_t> bytes);
  SqlStmt& bind_null(int index);

  Result<bool> step();
  Result<void> run();
  // Reusable again; bindings are kept until rebound.
  void reset();

  bool column_is_null(int column) const;
  std::int64_t column_int64(int column) const;
  std::string column_text(int column) const;
  std::vector<std::uint8_t> column_blob(int column) const;
  std::optional<std::int64_t> column_optional_int64(int column) const;
  std::optional<std::string> column_optional_text(int column) const;

 private:
  friend class SqlDb;
  SqlStmt() = default;
  struct Param {
    std::optional<std::string> value;
    unsigned type = 0;  // PostgreSQL type OID, 0: let the server infer
    bool binary = false;
  };
  void set(int index, Param p);

  std::optional<Statement> lite_;
  // PostgreSQL
  pg_conn* conn_ = nullptr;
  PgPrepared* prepared_ = nullptr;  // the connection's statements (owned by SqlDb)
  std::string sql_;
  std::vector<Param> params_;
  pg_result* res_ = nullptr;
  int row_ = -1, rows_ = 0;
  bool executed_ = false;
};

// A transaction guard; begun inside another (a batch), a savepoint.
class SqlTxn {
 public:
  SqlTxn(SqlTxn&& other) noexcept;
  SqlTxn& operator=(SqlTxn&&) = delete;
  ~SqlTxn();
  Result<void> commit();

 private:
  friend class SqlDb;
  SqlTxn() = default;
  std::optional<Transaction> lite_;
  pg_conn* conn_ = nullptr;  // null once committed or rolled back
  SqlDb* db_ = nullptr;      // for the nesting depth and savepoints
  int savepoint_ = 0;        // nested: savepoint number; 0 for the outermost
};

class SqlDb {
 public:
  static Result<SqlDb> open_sqlite(const std::filesystem::path& path, std::span<const Migration> migrations);
  // `url`: postgres://... or postgresql://... (libpq connection URI).
  static Result<SqlDb> open_postgres(const std::string& url, std::span<const Migration> migrations);

  SqlDb(SqlDb&&) noexcept;
  SqlDb& operator=(SqlDb&&) noexcept;
  ~SqlDb();

  bool postgres() const { return pg_ != nullptr; }
  Result<SqlStmt> prepare(std::string_view sql);
  // shared: a claim (PostgreSQL: shared advisory lock; SQLite: no difference).
  // Inside an open transaction: a savepoint (the outer one's lock applies).
  Result<SqlTxn> begin(bool shared = false);
  Result<void> exec_sql(const std::string& sql);

 private:
  SqlDb() = default;
  Result<void> pg_exec(const std::string& sql);
  friend class SqlTxn;
  std::optional<Database> lite_;
  pg_conn* pg_ = nullptr;
  std::unique_ptr<PgPrepared> prepared_;  // on the heap: statements keep a pointer across moves
  int depth_ = 0;  // open transactions (outermost plus savepoints)
};

// Steps `st` through its rows, calling `on_row(st)` to read each one's
// columns: the loop every query of several rows needs, written once.
template <class OnRow>
Result<void> for_each_row(SqlStmt& st, OnRow&& on_row) {
  while (true) {
    auto row = st.step();
    if (!row) return row.error();
    if (!*row) return {};
    on_row(st);
  }
}

// Every row, as `read(st)` makes it of the row's columns.
template <class Read, class Row = std::decay_t<std::invoke_result_t<Read&, SqlStmt&>>>
Result<std::vector<Row>> read_rows(SqlStmt& st, Read&& read) {
  std::vector<Row> out;
  if (auto r = for_each_row(st, [&](SqlStmt& s) { out.push_back(read(s)); }); !r) return r.error();
  return out;
}

// SQLite's `?` and `?N` parameters as PostgreSQL's `$N` (quoted text kept).
std::string to_postgres_params(std::string_view sql);

}  // namespace runsnack::pool
