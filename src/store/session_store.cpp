#include "store/session_store.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>

namespace runsnack {
namespace {

using nlohmann::json;

constexpr const char* kColumns = "id, grant_id, peer, address, path, services, opened, pid, kicked";

Result<std::vector<SessionRow>> collect(Statement& stmt) {
  std::vector<SessionRow> out;
  for (;;) {
    auto row = stmt.step();
    if (!row) return row.error();
    if (!*row) return out;
    SessionRow s;
    s.id = stmt.column_text(0);
    s.grant_id = stmt.column_text(1);
    s.peer = stmt.column_text(2);
    s.address = stmt.column_text(3);
    s.path = stmt.column_text(4);
    json services = json::parse(stmt.column_text(5), nullptr, false);
    if (services.is_array())
      for (const auto& name : services)
        if (name.is_string()) s.services.push_back(name.get<std::string>());
    s.opened = from_unix(stmt.column_int64(6));
    s.pid = stmt.column_int64(7);
    s.kicked = stmt.column_int64(8) != 0;
    out.push_back(std::move(s));
  }
}

std::string services_text(const std::vector<std::string>& services) {
  return json(services).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

bool process_running(std::int64_t pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

Result<void> SessionStore::add(const SessionRow& row) {
  auto stmt = db_.prepare(std::string("INSERT OR REPLACE INTO sessions (") + kColumns +
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  if (!stmt) return stmt.error();
  return stmt->bind(1, std::string_view(row.id))
      .bind(2, std::string_view(row.grant_id))
      .bind(3, std::string_view(row.peer))
      .bind(4, std::string_view(row.address))
      .bind(5, std::string_view(row.path))
      .bind(6, std::string_view(services_text(row.services)))
      .bind(7, to_unix(row.opened))
      .bind(8, row.pid)
      .bind(9, std::int64_t{row.kicked})
      .run();
}

Result<void> SessionStore::note_service(const std::string& id, const std::string& service) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto stmt = db_.prepare("SELECT services FROM sessions WHERE id = ?1");
  if (!stmt) return stmt.error();
  stmt->bind(1, std::string_view(id));
  auto row = stmt->step();
  if (!row) return row.error();
  if (!*row) return {};
  json services = json::parse(stmt->column_text(0), nullptr, false);
  if (!services.is_array()) services = json::array();
  if (services.size() >= kMaxSessionServices || std::find(services.begin(), services.end(), service) != services.end())
    return {};
  services.push_back(service);
  auto update = db_.prepare("UPDATE sessions SET services = ?2 WHERE id = ?1");
  if (!update) return update.error();
  const std::string text = services.dump(-1, ' ', false, json::error_handler_t::replace);
  if (auto r = update->bind(1, std::string_view(id)).bind(2, std::string_view(text)).run(); !r) return r.error();
  return tx->commit();
}

Result<void> SessionStore::remove(const std::string& id) {
  auto stmt = db_.prepare("DELETE FROM sessions WHERE id = ?1");
  if (!stmt) return stmt.error();
  return stmt->bind(1, std::string_view(id)).run();
}

Result<std::vector<SessionRow>> SessionStore::live() {
  auto stmt = db_.prepare(std::string("SELECT ") + kColumns + " FROM sessions ORDER BY opened, id");
  if (!stmt) return stmt.error();
  auto rows = collect(*stmt);
  if (!rows) return rows.error();
  std::erase_if(*rows, [](const SessionRow& s) { return !process_running(s.pid); });
  return rows;
}

Result<std::optional<SessionRow>> SessionStore::kick(const std::string& id) {
  auto rows = live();
  if (!rows) return rows.error();
  auto it = std::find_if(rows->begin(), rows->end(), [&](const SessionRow& s) { return s.id == id; });
  if (it == rows->end()) return std::optional<SessionRow>();
  auto stmt = db_.prepare("UPDATE sessions SET kicked = 1 WHERE id = ?1");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bind(1, std::string_view(id)).run(); !r) return r.error();
  it->kicked = true;
  return std::optional<SessionRow>(*it);
}

Result<std::vector<std::string>> SessionStore::kicked(std::int64_t pid) {
  auto stmt = db_.prepare("SELECT id FROM sessions WHERE pid = ?1 AND kicked <> 0");
  if (!stmt) return stmt.error();
  stmt->bind(1, pid);
  std::vector<std::string> out;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) return out;
    out.push_back(stmt->column_text(0));
  }
}

Result<std::int64_t> SessionStore::prune_dead() {
  auto stmt = db_.prepare("SELECT DISTINCT pid FROM sessions");
  if (!stmt) return stmt.error();
  std::vector<std::int64_t> dead;
  for (;;) {
    auto row = stmt->step();
    if (!row) return row.error();
    if (!*row) break;
    if (!process_running(stmt->column_int64(0))) dead.push_back(stmt->column_int64(0));
  }
  std::int64_t gone = 0;
  for (auto pid : dead) {
    auto del = db_.prepare("DELETE FROM sessions WHERE pid = ?1");
    if (!del) return del.error();
    if (auto r = del->bind(1, pid).run(); !r) return r.error();
    gone += db_.changes();
  }
  return gone;
}

}  // namespace runsnack
