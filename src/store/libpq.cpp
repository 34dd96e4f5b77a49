#include "store/libpq.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace runsnack {

namespace {

LibPq g_table;
std::string g_error;

template <typename Fn>
bool bind(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (!out) g_error = std::string("libpq has no ") + name + " (too old?)";
  return out != nullptr;
}

void open_once() {
  void* handle = ::dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    g_error = std::string("the PostgreSQL backend needs libpq (sudo apt install libpq5): ") +
              (why ? why : "not found");
    return;
  }
  LibPq t;
  const bool ok = bind(handle, "PQconnectdb", t.connectdb) && bind(handle, "PQstatus", t.status) &&
                  bind(handle, "PQfinish", t.finish) && bind(handle, "PQerrorMessage", t.error_message) &&
                  bind(handle, "PQexec", t.exec) && bind(handle, "PQexecParams", t.exec_params) &&
                  bind(handle, "PQprepare", t.prepare) && bind(handle, "PQexecPrepared", t.exec_prepared) &&
                  bind(handle, "PQresultStatus", t.result_status) &&
                  bind(handle, "PQresultErrorMessage", t.result_error_message) &&
                  bind(handle, "PQntuples", t.ntuples) && bind(handle, "PQgetvalue", t.getvalue) &&
                  bind(handle, "PQgetlength", t.getlength) && bind(handle, "PQgetisnull", t.getisnull) &&
                  bind(handle, "PQunescapeBytea", t.unescape_bytea) && bind(handle, "PQfreemem", t.freemem) &&
                  bind(handle, "PQclear", t.clear);
  if (ok) g_table = t;  // the handle stays open for the process's life
}

std::once_flag g_once;

}  // namespace

Result<const LibPq*> load_libpq() {
  std::call_once(g_once, open_once);
  if (!g_table.clear) return fail(errc::unsupported, g_error);
  return &g_table;
}

const LibPq& libpq() {
  if (!g_table.clear) std::abort();  // a connection without a loaded libpq: a bug
  return g_table;
}

}  // namespace runsnack
