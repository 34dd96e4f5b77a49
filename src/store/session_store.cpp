#include "store/session_store.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <map>

namespace runsnack {
namespace {

using nlohmann::json;

constexpr const char* kColumns = "id, grant_id, peer, address, path, services, opened, pid, kicked";

// with_unlisted: the statement selects sessions.unlisted_commands after kColumns.
Result<std::vector<SessionRow>> collect(Statement& stmt, bool with_unlisted = false) {
  return read_rows(stmt, [&](Statement& row) {
    SessionRow s;
    s.id = row.column_text(0);
    s.grant_id = row.column_text(1);
    s.peer = row.column_text(2);
    s.address = row.column_text(3);
    s.path = row.column_text(4);
    json services = json::parse(row.column_text(5), nullptr, false);
    if (services.is_array())
      for (const auto& name : services)
        if (name.is_string()) s.services.push_back(name.get<std::string>());
    s.opened = from_unix(row.column_int64(6));
    s.pid = row.column_int64(7);
    s.kicked = row.column_int64(8) != 0;
    if (with_unlisted) s.unlisted_commands = row.column_int64(9);
    return s;
  });
}

// The longest prefix of `text` of at most `max` bytes that does not split a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view text, std::size_t max) {
  if (text.size() <= max) return text;
  std::size_t cut = max;
  // Back off continuation bytes (10xxxxxx) to the start of the sequence they belong to.
  for (int i = 0; i < 3 && cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80; ++i) --cut;
  return text.substr(0, cut);
}

// `text`, or its start and "…" when it is longer than kMaxCommandText bytes.
std::string bounded_command(std::string_view text) {
  static constexpr std::string_view kEllipsis = "\u2026";
  if (text.size() <= kMaxCommandText) return std::string(text);
  return std::string(utf8_prefix(text, kMaxCommandText - kEllipsis.size())) + std::string(kEllipsis);
}

std::string services_text(const std::vector<std::string>& services) {
  return json(services).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string short_command_line(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) {
    if (!line.empty()) line += ' ';
    line.append(utf8_prefix(arg, kMaxCommandText + 1 - std::min(line.size(), kMaxCommandText)));
    if (line.size() > kMaxCommandText) break;
  }
  return bounded_command(line);
}

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

Result<std::int64_t> SessionStore::add_command(const CommandRow& row) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto count = db_.prepare("SELECT count(*) FROM session_commands WHERE session_id = ?1");
  if (!count) return count.error();
  count->bind(1, std::string_view(row.session_id));
  auto counted = count->step();
  if (!counted) return counted.error();
  std::int64_t id = 0;
  if (*counted && count->column_int64(0) >= static_cast<std::int64_t>(kMaxSessionCommands)) {
    auto more = db_.prepare("UPDATE sessions SET unlisted_commands = unlisted_commands + 1 WHERE id = ?1");
    if (!more) return more.error();
    if (auto r = more->bind(1, std::string_view(row.session_id)).run(); !r) return r.error();
  } else {
    auto insert = db_.prepare(
        "INSERT INTO session_commands (session_id, command, started, pid, cgroup, provider_pid) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
    if (!insert) return insert.error();
    const std::string command = bounded_command(row.command);
    if (auto r = insert->bind(1, std::string_view(row.session_id))
                     .bind(2, std::string_view(command))
                     .bind(3, to_unix(row.started))
                     .bind(4, row.pid)
                     .bind(5, std::string_view(row.cgroup))
                     .bind(6, row.provider_pid)
                     .run();
        !r)
      return r.error();
    id = db_.last_insert_rowid();
  }
  if (auto r = tx->commit(); !r) return r.error();
  return id;
}

Result<void> SessionStore::remove_command(std::int64_t id, const std::string& session_id) {
  if (id == 0) {
    auto less = db_.prepare(
        "UPDATE sessions SET unlisted_commands = unlisted_commands - 1 WHERE id = ?1 AND unlisted_commands > 0");
    if (!less) return less.error();
    return less->bind(1, std::string_view(session_id)).run();
  }
  auto stmt = db_.prepare("DELETE FROM session_commands WHERE id = ?1");
  if (!stmt) return stmt.error();
  return stmt->bind(1, id).run();
}

Result<std::vector<SessionRow>> SessionStore::live() {
  auto stmt = db_.prepare(std::string("SELECT ") + kColumns + ", unlisted_commands FROM sessions ORDER BY opened, id");
  if (!stmt) return stmt.error();
  auto rows = collect(*stmt, true);
  if (!rows) return rows.error();
  std::erase_if(*rows, [](const SessionRow& s) { return !process_running(s.pid); });
  if (rows->empty()) return rows;
  std::map<std::string, SessionRow*> by_id;
  for (auto& s : *rows) by_id[s.id] = &s;
  auto commands = db_.prepare(
      "SELECT id, session_id, command, started, pid, cgroup, provider_pid FROM session_commands ORDER BY started, id");
  if (!commands) return commands.error();
  auto read = for_each_row(*commands, [&](Statement& row) {
    auto it = by_id.find(row.column_text(1));
    // A command whose session is gone (lost, waiting for a re-attach) shows again under the session that re-attaches.
    if (it == by_id.end()) return;
    CommandRow c;
    c.id = row.column_int64(0);
    c.session_id = it->first;
    c.command = row.column_text(2);
    c.started = from_unix(row.column_int64(3));
    c.pid = row.column_int64(4);
    c.cgroup = row.column_text(5);
    c.provider_pid = row.column_int64(6);
    it->second->commands.push_back(std::move(c));
  });
  if (!read) return read.error();
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
  return read_rows(*stmt, [](Statement& row) { return row.column_text(0); });
}

Result<std::int64_t> SessionStore::prune_dead() {
  auto stmt = db_.prepare("SELECT DISTINCT pid FROM sessions");
  if (!stmt) return stmt.error();
  std::vector<std::int64_t> dead;
  auto collect_dead = [&](Statement& row) {
    if (!process_running(row.column_int64(0))) dead.push_back(row.column_int64(0));
  };
  if (auto r = for_each_row(*stmt, collect_dead); !r) return r.error();
  std::int64_t gone = 0;
  for (auto pid : dead) {
    auto del = db_.prepare("DELETE FROM sessions WHERE pid = ?1");
    if (!del) return del.error();
    if (auto r = del->bind(1, pid).run(); !r) return r.error();
    gone += db_.changes();
  }
  auto providers = db_.prepare("SELECT DISTINCT provider_pid FROM session_commands");
  if (!providers) return providers.error();
  dead.clear();
  if (auto r = for_each_row(*providers, collect_dead); !r) return r.error();
  for (auto pid : dead) {
    auto del = db_.prepare("DELETE FROM session_commands WHERE provider_pid = ?1");
    if (!del) return del.error();
    if (auto r = del->bind(1, pid).run(); !r) return r.error();
  }
  return gone;
}

}  // namespace runsnack
