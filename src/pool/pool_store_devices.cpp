// PoolStore: the workers' devices (registration, online, measured score),
// their reputation (results checked right or wrong, exclusion) and the
// learned scheduler's saved state.
#include "pool/pool_store.hpp"

namespace runsnack::pool {

Result<std::string> PoolStore::register_device(const std::string& peer, const std::string& kind,
                                               const std::string& name, double price, std::int64_t now_ms,
                                               std::optional<std::int64_t> max_task_seconds,
                                               const std::string& network) {
  std::string id = peer + "/" + kind;
  auto st = db_.prepare(
      "INSERT INTO devices (id, peer, kind, name, score, price, registered, last_seen, online, max_task_seconds, network) "
      "VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?6, 1, ?7, ?8) ON CONFLICT (id) DO UPDATE SET name = ?4, score = 0, "
      "price = ?5, last_seen = ?6, online = 1, max_task_seconds = ?7, network = ?8");
  // The score is the coordinator's measurement (set_device_score), never the
  // worker's word: none until it is measured. Leases already held keep the
  // terms they were given at (tasks.lease_price / lease_score).
  if (!st) return st.error();
  // Statement binds integers only: the price in milli-credits per hour (read
  // back the same way in devices()/complete()).
  st->bind(1, std::string_view(id)).bind(2, std::string_view(peer)).bind(3, std::string_view(kind)).bind(4, std::string_view(name));
  st->bind(5, static_cast<std::int64_t>(price * 1000)).bind(6, now_ms).bind(7, max_task_seconds);
  st->bind(8, std::string_view(network));
  if (auto r = st->run(); !r) return r.error();
  return id;
}

Result<void> PoolStore::set_device_online(const std::string& peer, bool online) {
  auto st = db_.prepare("UPDATE devices SET online = ? WHERE peer = ?");
  if (!st) return st.error();
  return st->bind(1, std::int64_t{online}).bind(2, std::string_view(peer)).run();
}

Result<void> PoolStore::save_scheduler_state(const nlohmann::json& state) {
  auto st = db_.prepare(
      "INSERT INTO scheduler_state (id, state) VALUES (1, ?1) ON CONFLICT (id) DO UPDATE SET state = ?1");
  if (!st) return st.error();
  return st->bind(1, std::string_view(state.dump())).run();
}

Result<std::optional<nlohmann::json>> PoolStore::scheduler_state() {
  auto st = db_.prepare("SELECT state FROM scheduler_state WHERE id = 1");
  if (!st) return st.error();
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<nlohmann::json>{};
  auto j = nlohmann::json::parse(st->column_text(0), nullptr, false);
  if (j.is_discarded()) return std::optional<nlohmann::json>{};
  return std::optional<nlohmann::json>(std::move(j));
}

Result<double> PoolStore::device_score(const std::string& device) {
  auto st = db_.prepare("SELECT CAST(score AS BIGINT) FROM devices WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(device));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no device " + device);
  return static_cast<double>(st->column_int64(0));
}

Result<std::vector<DeviceInfo>> PoolStore::devices() {
  auto st = db_.prepare(
      "SELECT d.id, d.peer, d.kind, d.name, CAST(d.score AS BIGINT), CAST(d.price AS BIGINT), d.online, "
      "(SELECT COUNT(*) FROM tasks t WHERE t.device = d.id AND t.state = 'done'), d.valid, d.invalid, d.excluded, "
      "d.max_task_seconds, d.lost, CASE WHEN EXISTS (SELECT 1 FROM trusted_peers p WHERE p.peer = d.peer) THEN 1 "
      "ELSE 0 END FROM devices d ORDER BY d.score DESC");
  if (!st) return st.error();
  return read_rows(*st, [](Statement& r) {
    DeviceInfo d;
    d.id = r.column_text(0), d.peer = r.column_text(1), d.kind = r.column_text(2), d.name = r.column_text(3);
    d.score = static_cast<double>(r.column_int64(4));
    d.price = static_cast<double>(r.column_int64(5)) / 1000.0;
    d.online = r.column_int64(6) != 0;
    d.tasks_done = r.column_int64(7);
    d.valid = r.column_int64(8), d.invalid = r.column_int64(9);
    d.excluded = r.column_optional_text(10);
    d.max_task_seconds = r.column_optional_int64(11);
    d.leases_lost = r.column_int64(12);
    d.trusted = r.column_int64(13) != 0;
    return d;
  });
}

Result<std::optional<std::string>> PoolStore::record_check(const std::string& device, const std::string& task,
                                                          const std::string& peer, bool valid, const std::string& reason,
                                                          std::int64_t exclude_after, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto up = db_.prepare(valid ? "UPDATE devices SET valid = valid + 1 WHERE id = ? RETURNING invalid"
                              : "UPDATE devices SET invalid = invalid + 1 WHERE id = ? RETURNING invalid");
  if (!up) return up.error();
  up->bind(1, std::string_view(device));
  auto row = up->step();
  if (!row) return row.error();
  std::int64_t invalid = *row ? up->column_int64(0) : 0;
  if (*row)
    if (auto more = up->step(); !more) return more.error();
  std::optional<std::string> excluded;
  if (!valid) {
    auto rj = db_.prepare("INSERT INTO rejections (task, peer, reason, time) VALUES (?, ?, ?, ?)");
    if (!rj) return rj.error();
    if (auto r = rj->bind(1, std::string_view(task)).bind(2, std::string_view(peer)).bind(3, std::string_view(reason)).bind(4, now_ms).run(); !r)
      return r.error();
    if (exclude_after > 0 && invalid >= exclude_after) {
      excluded = std::to_string(invalid) + " results caught wrong; last: " + reason;
      auto ex = db_.prepare("UPDATE devices SET excluded = ? WHERE id = ? AND excluded IS NULL");
      if (!ex) return ex.error();
      if (auto r = ex->bind(1, std::string_view(*excluded)).bind(2, std::string_view(device)).run(); !r) return r.error();
    }
  }
  if (auto r = tx->commit(); !r) return r.error();
  return excluded;
}

Result<std::int64_t> PoolStore::valid_results(const std::string& device) {
  auto st = db_.prepare("SELECT valid FROM devices WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(device));
  auto row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int64(0) : std::int64_t{0};
}

Result<void> PoolStore::trust_peer(const std::string& peer, bool trusted, std::int64_t now_ms) {
  auto st = db_.prepare(trusted ? "INSERT INTO trusted_peers (peer, since) VALUES (?1, ?2) ON CONFLICT (peer) DO NOTHING"
                                : "DELETE FROM trusted_peers WHERE peer = ?1");
  if (!st) return st.error();
  st->bind(1, std::string_view(peer));
  if (trusted) st->bind(2, now_ms);
  return st->run();
}

Result<bool> PoolStore::peer_trusted(const std::string& peer) {
  auto st = db_.prepare("SELECT 1 FROM trusted_peers WHERE peer = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(peer));
  auto row = st->step();
  if (!row) return row.error();
  return *row;
}

Result<bool> PoolStore::vouched_for(const std::string& peer, std::int64_t checks) {
  auto st = db_.prepare(
      "SELECT CASE WHEN EXISTS (SELECT 1 FROM trusted_peers WHERE peer = ?1) OR EXISTS (SELECT 1 FROM devices "
      "WHERE peer = ?1 AND valid >= ?2 AND excluded IS NULL) THEN 1 ELSE 0 END");
  if (!st) return st.error();
  st->bind(1, std::string_view(peer)).bind(2, checks);
  auto row = st->step();
  if (!row) return row.error();
  return *row && st->column_int64(0) != 0;
}

Result<std::set<std::string>> PoolStore::vouched_online_peers(std::int64_t checks, std::int64_t limit) {
  auto st = db_.prepare(
      "SELECT DISTINCT d.peer FROM devices d WHERE d.online = 1 AND d.excluded IS NULL AND (d.valid >= ?1 OR "
      "EXISTS (SELECT 1 FROM trusted_peers p WHERE p.peer = d.peer)) LIMIT ?2");
  if (!st) return st.error();
  st->bind(1, checks).bind(2, limit);
  std::set<std::string> out;
  auto read = for_each_row(*st, [&](Statement& r) { out.insert(r.column_text(0)); });
  if (!read) return read.error();
  return out;
}

Result<std::optional<std::string>> PoolStore::exclusion(const std::string& device) {
  auto st = db_.prepare("SELECT excluded FROM devices WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(device));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<std::string>{};
  return st->column_optional_text(0);
}

}  // namespace runsnack::pool
