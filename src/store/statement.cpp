// Statement (store/database.hpp) for both engines: SQLite steps its compiled
// statement row by row; PostgreSQL executes the server-side prepared
// statement on the first step() (one round trip) and then reads the rows it
// returned.
#include "store/database.hpp"

#include <sqlite3.h>

#include <cstdlib>
#include <utility>

#include "store/db_connection.hpp"
#include "store/libpq.hpp"

namespace runsnack {
namespace {

constexpr unsigned kInt8Oid = 20, kTextOid = 25, kByteaOid = 17;

}  // namespace

void Statement::Finalizer::operator()(sqlite3_stmt* stmt) const noexcept { sqlite3_finalize(stmt); }

void Statement::ResultClear::operator()(pg_result* res) const noexcept { libpq().clear(res); }

Statement::~Statement() = default;

void Statement::note_bind(int rc, int index) {
  if (rc != SQLITE_OK && !bind_error_)
    bind_error_ =
        sqlite_error(sqlite3_db_handle(lite_.get()), rc, "cannot bind parameter " + std::to_string(index));
}

void Statement::set_pg(int index, PgParam p) {
  if (index < 1) return;
  if (params_.size() < static_cast<std::size_t>(index)) params_.resize(static_cast<std::size_t>(index));
  params_[static_cast<std::size_t>(index - 1)] = std::move(p);
}

Statement& Statement::bind(int index, std::int64_t value) {
  if (lite_) note_bind(sqlite3_bind_int64(lite_.get(), index, value), index);
  else set_pg(index, {std::to_string(value), kInt8Oid, false});
  return *this;
}

Statement& Statement::bind(int index, std::string_view text) {
  // SQLITE_TRANSIENT: SQLite copies, so the caller's buffer may go away.
  if (lite_)
    note_bind(sqlite3_bind_text64(lite_.get(), index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8),
              index);
  else set_pg(index, {std::string(text), kTextOid, false});
  return *this;
}

Statement& Statement::bind_blob(int index, std::span<const std::uint8_t> bytes) {
  if (lite_) note_bind(sqlite3_bind_blob64(lite_.get(), index, bytes.data(), bytes.size(), SQLITE_TRANSIENT), index);
  else set_pg(index, {std::string(bytes.begin(), bytes.end()), kByteaOid, true});
  return *this;
}

Statement& Statement::bind_null(int index) {
  if (lite_) note_bind(sqlite3_bind_null(lite_.get(), index), index);
  else set_pg(index, {std::nullopt, 0, false});
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::int64_t>& value) {
  if (lite_) return value ? bind(index, *value) : bind_null(index);
  set_pg(index, {value ? std::optional<std::string>(std::to_string(*value)) : std::nullopt, kInt8Oid, false});
  return *this;
}

Statement& Statement::bind(int index, const std::optional<std::string>& text) {
  if (lite_) return text ? bind(index, std::string_view(*text)) : bind_null(index);
  set_pg(index, {text, kTextOid, false});
  return *this;
}

Result<bool> Statement::step() {
  if (lite_) {
    if (bind_error_) return *bind_error_;
    int rc = sqlite3_step(lite_.get());
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    Error e = sqlite_error(sqlite3_db_handle(lite_.get()), rc, "sqlite");
    sqlite3_reset(lite_.get());
    return e;
  }
  if (!executed_) {
    executed_ = true;
    if (auto r = execute_pg(); !r) return r.error();
  }
  if (row_ < rows_) ++row_;
  return row_ < rows_;
}

// Runs the statement on the server: prepared there the first time this
// connection sees its text and parameter types, only executed after that.
Result<void> Statement::execute_pg() {
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
  auto& prepared = pg_->prepared;
  const std::string* name = nullptr;
  if (auto it = prepared.find(key); it != prepared.end()) {
    name = &it->second;
  } else if (prepared.size() < DbConnection::kMaxPrepared) {
    std::string fresh = "rs" + std::to_string(prepared.size());
    PGresult* made = libpq().prepare(pg_->pg, fresh.c_str(), sql_.c_str(), n, types.data());
    auto ok = pg_check(pg_->pg, made, "postgres");
    libpq().clear(made);
    if (!ok) return ok.error();
    name = &prepared.emplace(std::move(key), std::move(fresh)).first->second;
  }
  res_.reset(name ? libpq().exec_prepared(pg_->pg, name->c_str(), n, values.data(), lengths.data(),
                                          formats.data(), 0)
                  : libpq().exec_params(pg_->pg, sql_.c_str(), n, types.data(), values.data(), lengths.data(),
                                        formats.data(), 0));
  if (auto r = pg_check(pg_->pg, res_.get(), "postgres"); !r) return r.error();
  rows_ = libpq().result_status(res_.get()) == PGRES_TUPLES_OK ? libpq().ntuples(res_.get()) : 0;
  return {};
}

Result<void> Statement::run() {
  for (;;) {
    auto row = step();
    if (!row) return row.error();
    if (!*row) return {};
  }
}

void Statement::reset() {
  if (lite_) {
    sqlite3_reset(lite_.get());
    bind_error_.reset();
    return;
  }
  res_.reset();
  executed_ = false, row_ = -1, rows_ = 0;
}

bool Statement::column_is_null(int column) const {
  if (lite_) return sqlite3_column_type(lite_.get(), column) == SQLITE_NULL;
  return !res_ || row_ >= rows_ || libpq().getisnull(res_.get(), row_, column);
}

std::int64_t Statement::column_int64(int column) const {
  if (lite_) return sqlite3_column_int64(lite_.get(), column);
  if (column_is_null(column)) return 0;
  return std::strtoll(libpq().getvalue(res_.get(), row_, column), nullptr, 10);
}

std::string Statement::column_text(int column) const {
  if (lite_) {
    const auto* text = sqlite3_column_text(lite_.get(), column);
    if (!text) return {};
    return std::string(reinterpret_cast<const char*>(text),
                       static_cast<std::size_t>(sqlite3_column_bytes(lite_.get(), column)));
  }
  if (column_is_null(column)) return {};
  return {libpq().getvalue(res_.get(), row_, column),
          static_cast<std::size_t>(libpq().getlength(res_.get(), row_, column))};
}

std::vector<std::uint8_t> Statement::column_blob(int column) const {
  if (lite_) {
    const auto* data = static_cast<const std::uint8_t*>(sqlite3_column_blob(lite_.get(), column));
    if (!data) return {};
    return std::vector<std::uint8_t>(data, data + sqlite3_column_bytes(lite_.get(), column));
  }
  if (column_is_null(column)) return {};
  std::size_t n = 0;
  const auto* escaped = reinterpret_cast<const unsigned char*>(libpq().getvalue(res_.get(), row_, column));
  unsigned char* raw = libpq().unescape_bytea(escaped, &n);
  if (!raw) return {};
  std::vector<std::uint8_t> out(raw, raw + n);
  libpq().freemem(raw);
  return out;
}

std::optional<std::int64_t> Statement::column_optional_int64(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_int64(column);
}

std::optional<std::string> Statement::column_optional_text(int column) const {
  if (column_is_null(column)) return std::nullopt;
  return column_text(column);
}

}  // namespace runsnack
