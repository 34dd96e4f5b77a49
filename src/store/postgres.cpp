// The PostgreSQL side of the database seam (store/database.hpp): connecting,
// errors, and SQLite-style parameters rewritten for the server.
#include "store/db_connection.hpp"
#include "store/libpq.hpp"

#include <utility>

namespace runsnack {
namespace {

std::string trimmed(std::string msg) {
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
  return msg;
}

Error pg_error(pg_conn* conn, std::string_view what) {
  std::string msg = conn ? libpq().error_message(conn) : "out of memory";
  return fail(errc::io_error, std::string(what) + ": " + trimmed(std::move(msg)));
}

}  // namespace

Result<void> pg_check(pg_conn* conn, pg_result* res, std::string_view what) {
  auto st = libpq().result_status(res);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return {};
  std::string msg = res ? libpq().result_error_message(res) : libpq().error_message(conn);
  return fail(errc::io_error, std::string(what) + ": " + trimmed(std::move(msg)));
}

Result<void> pg_exec(pg_conn* conn, const char* sql) {
  PGresult* res = libpq().exec(conn, sql);
  auto r = pg_check(conn, res, "postgres");
  libpq().clear(res);
  return r;
}

Result<std::unique_ptr<DbConnection>> pg_connect(const std::string& url) {
  if (auto loaded = load_libpq(); !loaded) return loaded.error();
  auto conn = std::make_unique<DbConnection>();
  conn->pg = libpq().connectdb(url.c_str());
  if (!conn->pg || libpq().status(conn->pg) != CONNECTION_OK)
    return pg_error(conn->pg, "cannot connect to PostgreSQL");
  if (auto r = pg_exec(conn->pg, "SET client_min_messages = warning"); !r) return r.error();
  // Commits do not wait for the WAL flush: each would otherwise cost a disk
  // sync (milliseconds) on the pool coordinator's one thread. A PostgreSQL
  // crash can then lose the last fraction of a second of commits, each whole
  // (a lease or an accepted result with its payment): those tasks run
  // again; nothing is paid twice or half. A coordinator crash loses nothing.
  // A URL's options=-csynchronous_commit=on takes precedence for those who
  // prefer waiting.
  if (url.find("synchronous_commit") == std::string::npos)
    if (auto r = pg_exec(conn->pg, "SET synchronous_commit = off"); !r) return r.error();
  return conn;
}

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

}  // namespace runsnack
