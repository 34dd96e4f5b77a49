// PoolStore: training jobs (pool/trainer.hpp): created, read, advanced a round at a time, ended.
// Each round is a job of its own (pool_store_jobs.cpp); a training row keeps what outlives
// rounds: the spec, the shared input, the weights and momentum of the last finished round and
// every round's metrics.
#include "pool/pool_store.hpp"

#include "link/link.hpp"
#include "pool/wire.hpp"

namespace runsnack::pool {

using json = nlohmann::json;

namespace {

constexpr const char* kColumns =
    "id, owner, spec, budget, state, reason, round, round_job, metrics, spent, created, finished, awaiting_data";

TrainingRow row_of(const Statement& st) {
  TrainingRow t;
  t.id = st.column_text(0), t.owner = st.column_text(1);
  t.spec = json::parse(st.column_text(2), nullptr, false);
  t.budget = st.column_int64(3);
  t.state = st.column_text(4), t.reason = st.column_text(5);
  t.round = st.column_int64(6);
  t.round_job = st.column_optional_text(7);
  t.metrics = json::parse(st.column_text(8), nullptr, false);
  if (!t.metrics.is_array()) t.metrics = json::array();
  t.spent = st.column_int64(9), t.created_ms = st.column_int64(10);
  t.finished_ms = st.column_optional_int64(11);
  t.awaiting_data = st.column_int64(12) != 0;
  return t;
}

}  // namespace

Result<std::string> PoolStore::create_training(const std::string& owner, const json& spec, const json& input,
                                               std::string_view weights, Micro budget, std::int64_t now_ms,
                                               bool awaiting_data) {
  if (budget < 0) return fail(errc::invalid_argument, "a negative budget");
  auto have = balance(peer_account(owner));
  if (!have) return have.error();
  if (*have < budget)
    return fail(errc::refused, "not enough credit: balance " + format_credits(*have) + ", budget " + format_credits(budget));
  const std::string id = "t" + new_grant_id();
  auto st = db_.prepare("INSERT INTO trainings (id, owner, spec, input, budget, state, weights, created, awaiting_data) "
                        "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)");
  if (!st) return st.error();
  const std::string encoded = base64_encode(weights);
  st->bind(1, std::string_view(id)).bind(2, std::string_view(owner)).bind(3, std::string_view(spec.dump()));
  st->bind(4, std::string_view(input.dump())).bind(5, budget).bind(6, std::string_view(encoded)).bind(7, now_ms);
  st->bind(8, std::int64_t{awaiting_data ? 1 : 0});
  if (auto r = st->run(); !r) return r.error();
  return id;
}

Result<std::optional<TrainingRow>> PoolStore::training(const std::string& id, bool with_weights) {
  auto st = db_.prepare(std::string("SELECT ") + kColumns + (with_weights ? ", weights, momentum" : "") +
                        " FROM trainings WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(id));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<TrainingRow>{};
  TrainingRow t = row_of(*st);
  if (with_weights) {
    auto w = base64_decode(st->column_text(13));
    auto m = base64_decode(st->column_text(14));
    if (!w || !m) return fail(errc::internal, "training " + id + ": its stored weights do not decode");
    t.weights = std::move(*w), t.momentum = std::move(*m);
  }
  return std::optional<TrainingRow>(std::move(t));
}

Result<std::vector<TrainingRow>> PoolStore::trainings(const std::optional<std::string>& owner, std::int64_t limit) {
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM trainings" + (owner ? " WHERE owner = ?2" : "") +
                        " ORDER BY created DESC LIMIT ?1");
  if (!st) return st.error();
  st->bind(1, limit);
  if (owner) st->bind(2, std::string_view(*owner));
  std::vector<TrainingRow> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(row_of(*st));
  }
  return out;
}

Result<std::int64_t> PoolStore::running_trainings_of(const std::string& owner) {
  auto st = db_.prepare("SELECT COUNT(*) FROM trainings WHERE state = 'running' AND owner = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(owner));
  auto row = st->step();
  if (!row) return row.error();
  return *row ? st->column_int64(0) : 0;
}

Result<std::vector<std::string>> PoolStore::running_trainings(const std::string& after, std::int64_t limit) {
  auto st = db_.prepare("SELECT id FROM trainings WHERE state = 'running' AND id > ? ORDER BY id LIMIT ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(after)).bind(2, limit);
  std::vector<std::string> out;
  while (true) {
    auto row = st->step();
    if (!row) return row.error();
    if (!*row) break;
    out.push_back(st->column_text(0));
  }
  return out;
}

Result<void> PoolStore::set_round_job(const std::string& id, const std::string& job) {
  auto st = db_.prepare("UPDATE trainings SET round_job = ? WHERE id = ? AND state = 'running'");
  if (!st) return st.error();
  return st->bind(1, std::string_view(job)).bind(2, std::string_view(id)).run();
}

Result<void> PoolStore::finish_round(const std::string& id, std::int64_t round, std::string_view weights,
                                     std::string_view momentum, const json& metrics, Micro spent) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto read = db_.prepare("SELECT metrics FROM trainings WHERE id = ? AND round = ? AND state = 'running'");
  if (!read) return read.error();
  read->bind(1, std::string_view(id)).bind(2, round);
  auto row = read->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::refused, "training " + id + " is not at round " + std::to_string(round));
  json all = json::parse(read->column_text(0), nullptr, false);
  if (!all.is_array()) all = json::array();
  all.push_back(metrics);
  auto st = db_.prepare(
      "UPDATE trainings SET round = round + 1, round_job = NULL, weights = ?, momentum = ?, metrics = ?, "
      "spent = spent + ? WHERE id = ?");
  if (!st) return st.error();
  const std::string w = base64_encode(weights), m = base64_encode(momentum);
  st->bind(1, std::string_view(w)).bind(2, std::string_view(m)).bind(3, std::string_view(all.dump()));
  if (auto r = st->bind(4, spent).bind(5, std::string_view(id)).run(); !r) return r.error();
  return tx->commit();
}

Result<void> PoolStore::finish_training(const std::string& id, const std::string& state, const std::string& reason,
                                        std::int64_t now_ms, const std::optional<std::string>& owner) {
  auto st = db_.prepare(
      "UPDATE trainings SET state = ?, reason = ?, finished = ? WHERE id = ? AND state = 'running'" +
      std::string(owner ? " AND owner = ?" : "") + " RETURNING id");
  if (!st) return st.error();
  st->bind(1, std::string_view(state)).bind(2, std::string_view(reason)).bind(3, now_ms).bind(4, std::string_view(id));
  if (owner) st->bind(5, std::string_view(*owner));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::refused, "no running training " + id + (owner ? " of yours" : ""));
  return {};
}

}  // namespace runsnack::pool
