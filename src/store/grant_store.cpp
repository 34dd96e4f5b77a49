#include "store/grant_store.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace runsnack {
namespace {

using nlohmann::json;

constexpr const char* kColumns =
    "id, key, created, expires, max_uses, connections, max_sessions, bandwidth_bytes_per_s, services, gpus, "
    "bind_first, bound_peer, revoked, label, terms, consumers";

std::optional<std::int64_t> optional_unix(const std::optional<TimePoint>& t) {
  if (!t) return std::nullopt;
  return to_unix(*t);
}

std::string services_text(const Grant& g) {
  json arr = json::array();
  for (const auto& s : g.services) arr.push_back(s);
  return arr.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string gpus_text(const Grant& g) { return json(g.gpus).dump(); }

Result<Grant> decode_row(const Statement& row) {
  Grant g;
  g.id = row.column_text(0);
  auto key = row.column_blob(1);
  if (key.size() != g.key.size())
    return fail(errc::malformed, "grant " + g.id + ": stored key is not 32 bytes");
  std::copy(key.begin(), key.end(), g.key.begin());
  g.created = from_unix(row.column_int64(2));
  if (auto e = row.column_optional_int64(3)) g.expires = from_unix(*e);
  g.max_uses = row.column_optional_int64(4);
  g.connections = row.column_int64(5);
  g.max_sessions = row.column_optional_int64(6);
  g.bandwidth_bytes_per_s = row.column_optional_int64(7);

  json services = json::parse(row.column_text(8), nullptr, false);
  if (!services.is_array())
    return fail(errc::malformed, "grant " + g.id + ": stored services are not a list");
  g.services.clear();
  for (const auto& s : services) {
    if (!s.is_string()) return fail(errc::malformed, "grant " + g.id + ": stored service is not a name");
    g.services.insert(s.get<std::string>());
  }
  json gpus = json::parse(row.column_text(9), nullptr, false);
  if (!gpus.is_array()) return fail(errc::malformed, "grant " + g.id + ": stored gpus are not a list");
  for (const auto& i : gpus) {
    if (!i.is_number_integer())
      return fail(errc::malformed, "grant " + g.id + ": stored gpu is not an index");
    g.gpus.push_back(i.get<int>());
  }
  g.bind_first = row.column_int64(10) != 0;
  g.bound_peer = row.column_optional_text(11);
  g.revoked = row.column_int64(12) != 0;
  g.label = row.column_text(13);
  json terms = json::parse(row.column_text(14), nullptr, false);
  if (!terms.is_object()) return fail(errc::malformed, "grant " + g.id + ": stored terms are not an object");
  g.terms = std::move(terms);
  g.consumers = row.column_int64(15);
  return g;
}

Result<std::vector<Grant>> collect(Statement& stmt) {
  std::vector<Grant> out;
  auto read = for_each_row(stmt, [&](Statement& row) -> Result<void> {
    auto g = decode_row(row);
    if (!g) return g.error();
    out.push_back(std::move(*g));
    return {};
  });
  if (!read) return read.error();
  return out;
}

}  // namespace

Result<void> GrantStore::create(const Grant& g) {
  if (!g.terms.is_object()) return fail(errc::invalid_argument, "grant terms must be a JSON object");
  const std::string terms_text = g.terms.dump(-1, ' ', false, json::error_handler_t::replace);
  auto stmt = db_.prepare(std::string("INSERT INTO grants (") + kColumns +
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
  if (!stmt) return stmt.error();
  stmt->bind(1, std::string_view(g.id))
      .bind_blob(2, g.key)
      .bind(3, to_unix(g.created))
      .bind(4, optional_unix(g.expires))
      .bind(5, g.max_uses)
      .bind(6, g.connections)
      .bind(7, g.max_sessions)
      .bind(8, g.bandwidth_bytes_per_s)
      .bind(9, std::string_view(services_text(g)))
      .bind(10, std::string_view(gpus_text(g)))
      .bind(11, std::int64_t{g.bind_first})
      .bind(12, g.bound_peer)
      .bind(13, std::int64_t{g.revoked})
      .bind(14, std::string_view(g.label))
      .bind(15, std::string_view(terms_text))
      .bind(16, g.consumers);
  if (auto r = stmt->run(); !r) {
    if (r.error().is(errc::invalid_argument))
      return fail(errc::invalid_argument, "cannot store grant " + g.id + ": " + r.error().message);
    return r.error();
  }
  return {};
}

Result<std::optional<Grant>> GrantStore::find(std::string_view id) {
  auto stmt = db_.prepare(std::string("SELECT ") + kColumns + " FROM grants WHERE id = ?1");
  if (!stmt) return stmt.error();
  stmt->bind(1, id);
  auto found = collect(*stmt);
  if (!found) return found.error();
  if (found->empty()) return std::optional<Grant>();
  return std::optional<Grant>(std::move(found->front()));
}

Result<std::vector<Grant>> GrantStore::list(bool include_dead) {
  std::string sql = std::string("SELECT ") + kColumns + " FROM grants";
  if (!include_dead)
    sql += " WHERE revoked = 0 AND (expires IS NULL OR expires > ?1)";
  sql += " ORDER BY created, id";
  auto stmt = db_.prepare(sql);
  if (!stmt) return stmt.error();
  if (!include_dead) stmt->bind(1, to_unix(clock_.now()));
  return collect(*stmt);
}

Result<bool> GrantStore::revoke(std::string_view id) {
  auto stmt = db_.prepare("UPDATE grants SET revoked = 1 WHERE id = ?1 AND revoked = 0");
  if (!stmt) return stmt.error();
  if (auto r = stmt->bind(1, id).run(); !r) return r.error();
  if (db_.changes() == 1) return true;
  auto existing = find(id);
  if (!existing) return existing.error();
  return existing->has_value();
}

Result<bool> GrantStore::record_use(std::string_view id, std::string_view consumer_peer, TimePoint now) {
  // Every condition that depends on stored state, read and written under the
  // write lock (BEGIN IMMEDIATE): nothing another process does can come between.
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto grant = db_.prepare(
      "SELECT max_uses, consumers FROM grants WHERE id = ?1 AND revoked = 0 AND (expires IS NULL OR expires > ?3)"
      " AND (bound_peer IS NULL OR bound_peer = ?2)");
  if (!grant) return grant.error();
  grant->bind(1, id).bind(2, consumer_peer).bind(3, to_unix(now));
  auto found = grant->step();
  if (!found) return found.error();
  if (!*found) return false;  // unknown, revoked, expired or bound to another
  const std::optional<std::int64_t> max_uses = grant->column_optional_int64(0);
  const std::int64_t consumers = grant->column_int64(1);
  grant->reset();

  auto known = db_.prepare("SELECT 1 FROM grant_consumers WHERE grant_id = ?1 AND peer_id = ?2");
  if (!known) return known.error();
  auto is_known = known->bind(1, id).bind(2, consumer_peer).step();
  if (!is_known) return is_known.error();
  const bool known_consumer = *is_known;
  known->reset();
  std::int64_t added = 0;
  if (!known_consumer) {
    if (max_uses && consumers >= *max_uses) return false;  // full: this would be one more
    if (consumers < kMaxUsesLimit) {  // an unlimited link records as many as a limited one may have
      auto add = db_.prepare("INSERT INTO grant_consumers (grant_id, peer_id, first_seen) VALUES (?1, ?2, ?3)");
      if (!add) return add.error();
      if (auto r = add->bind(1, id).bind(2, consumer_peer).bind(3, to_unix(now)).run(); !r) return r.error();
      added = 1;
    }
  }
  auto count = db_.prepare(
      "UPDATE grants SET connections = connections + 1, consumers = consumers + ?3,"
      " bound_peer = CASE WHEN bind_first <> 0 AND bound_peer IS NULL THEN ?2 ELSE bound_peer END"
      " WHERE id = ?1");
  if (!count) return count.error();
  if (auto r = count->bind(1, id).bind(2, consumer_peer).bind(3, added).run(); !r) return r.error();
  if (auto r = tx->commit(); !r) return r.error();
  return true;
}

}  // namespace runsnack
