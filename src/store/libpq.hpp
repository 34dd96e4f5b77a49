#pragma once
// libpq, opened when a Database first connects to PostgreSQL
// (store/database.hpp). Linked, it would be loaded by every runsnack command,
// and with it Kerberos, LDAP, GnuTLS and a dozen more libraries: about 14 ms
// of every command's start (docs/PERFORMANCE.md), for a backend only
// `pool serve --db postgres` uses.

#include <libpq-fe.h>

#include "core/error.hpp"

namespace runsnack {

struct LibPq {
  decltype(&::PQconnectdb) connectdb = nullptr;
  decltype(&::PQstatus) status = nullptr;
  decltype(&::PQfinish) finish = nullptr;
  decltype(&::PQerrorMessage) error_message = nullptr;
  decltype(&::PQexec) exec = nullptr;
  decltype(&::PQexecParams) exec_params = nullptr;
  decltype(&::PQprepare) prepare = nullptr;
  decltype(&::PQexecPrepared) exec_prepared = nullptr;
  decltype(&::PQresultStatus) result_status = nullptr;
  decltype(&::PQresultErrorMessage) result_error_message = nullptr;
  decltype(&::PQntuples) ntuples = nullptr;
  decltype(&::PQgetvalue) getvalue = nullptr;
  decltype(&::PQgetlength) getlength = nullptr;
  decltype(&::PQgetisnull) getisnull = nullptr;
  decltype(&::PQunescapeBytea) unescape_bytea = nullptr;
  decltype(&::PQfreemem) freemem = nullptr;
  decltype(&::PQclear) clear = nullptr;
};

// Opens libpq once (thread-safe); an error that says what to install when it
// cannot.
Result<const LibPq*> load_libpq();
// The table load_libpq() filled: only for code that holds a connection, which
// exists only after a successful load.
const LibPq& libpq();

}  // namespace runsnack
