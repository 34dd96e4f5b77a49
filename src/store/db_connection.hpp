#pragma once
// Inside store/ only: the engine handle behind a Database (store/database.hpp),
// shared by database.cpp (connections, transactions), statement.cpp and
// postgres.cpp (the libpq side).

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/error.hpp"

struct sqlite3;
struct pg_conn;
struct pg_result;

namespace runsnack {

struct DbConnection {
  // Server-side prepared statements (PostgreSQL): statement text plus
  // parameter types -> name. Bounded: past the cap (statements whose text is
  // made per call, e.g. a batch's VALUES list of one length) they run unprepared.
  static constexpr std::size_t kMaxPrepared = 512;

  DbConnection() = default;
  DbConnection(const DbConnection&) = delete;
  DbConnection& operator=(const DbConnection&) = delete;
  ~DbConnection();  // closes whichever engine is open

  sqlite3* lite = nullptr;  // exactly one of the two is set
  pg_conn* pg = nullptr;
  std::unordered_map<std::string, std::string> prepared;
  int depth = 0;  // open transactions (outermost plus savepoints)
};

// SQLite: a Result error from the code `rc` and the connection's message.
Error sqlite_error(sqlite3* db, int rc, std::string_view what);
errc sqlite_code(int rc);

// PostgreSQL (postgres.cpp). Connects and sets the session up (libpq loaded on first use).
Result<std::unique_ptr<DbConnection>> pg_connect(const std::string& url);
// `res` as a Result: an error (with the server's message) unless the command succeeded.
Result<void> pg_check(pg_conn* conn, pg_result* res, std::string_view what);
// Runs `sql` (one or more statements, no parameters) as a simple query: one round trip.
Result<void> pg_exec(pg_conn* conn, const char* sql);
// SQLite's `?` and `?N` parameters as PostgreSQL's `$N` (quoted text kept).
std::string to_postgres_params(std::string_view sql);

}  // namespace runsnack
