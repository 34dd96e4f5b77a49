// PoolStore: a job's life: created with its tasks and escrow, its
// definition read back, finished (done, failed, cancelled) with what its
// escrow still holds refunded.
#include "pool/pool_store.hpp"

#include "link/link.hpp"

namespace runsnack::pool {
namespace {

std::string new_id(const char* prefix) { return std::string(prefix) + new_grant_id(); }

}  // namespace

Result<std::string> PoolStore::create_job(const std::string& owner, const std::string& workload,
                                          const nlohmann::json& spec, const nlohmann::json& input,
                                          const nlohmann::json& info, std::int64_t shards, Micro budget,
                                          std::int64_t now_ms, const JobRules& rules) {
  if (shards <= 0) return fail(errc::invalid_argument, "a job needs at least one shard");
  if (budget < 0) return fail(errc::invalid_argument, "a negative budget");
  if (rules.retries < 0 || rules.retries > 100) return fail(errc::invalid_argument, "retries must be 0..100");
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto have = balance(peer_account(owner));
  if (!have) return have.error();
  if (*have < budget)
    return fail(errc::refused, "not enough credit: balance " + format_credits(*have) + ", budget " +
                                   format_credits(budget));
  std::string job = new_id("j");
  auto st = db_.prepare(
      "INSERT INTO jobs (id, owner, workload, spec, input, shards, budget, state, created, info, retries, allow_failures, "
      "needs) VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)");
  if (!st) return st.error();
  st->bind(1, std::string_view(job)).bind(2, std::string_view(owner)).bind(3, std::string_view(workload)).bind(4, std::string_view(spec.dump())).bind(5, std::string_view(input.dump()));
  st->bind(6, shards).bind(7, budget).bind(8, now_ms).bind(9, std::string_view(info.is_object() ? info.dump() : "{}"));
  if (auto r = st->bind(10, std::int64_t{rules.retries}).bind(11, std::int64_t{rules.allow_failures})
                   .bind(12, std::string_view(rules.needs))
                   .run();
      !r)
    return r.error();
  // Every task in one statement (not a round trip per shard): ids "<job>.<shard>".
  auto ins = db_.prepare(
      "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i + 1 < ?2) "
      "INSERT INTO tasks (id, job, shard, state) SELECT ?1 || '.' || CAST(i AS TEXT), ?1, i, 'pending' FROM s");
  if (!ins) return ins.error();
  if (auto r = ins->bind(1, std::string_view(job)).bind(2, shards).run(); !r) return r.error();
  if (budget > 0) {
    auto txn = new_txn("escrow", now_ms);
    if (!txn) return txn.error();
    if (auto r = entry(*txn, peer_account(owner), -budget, "escrow", std::nullopt, job); !r) return r.error();
    if (auto r = entry(*txn, escrow_account(job), budget, "escrow", std::nullopt, job); !r) return r.error();
  }
  if (auto r = tx->commit(); !r) return r.error();
  return job;
}

Result<nlohmann::json> PoolStore::job_input(const std::string& job) {
  auto st = db_.prepare("SELECT input FROM jobs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no job " + job);
  auto input = nlohmann::json::parse(st->column_text(0), nullptr, false);
  // A training round's job: the training's files (script, data), then the round's own (weights).
  if (input.is_object() && input.contains("training") && input["training"].is_string()) {
    auto shared = db_.prepare("SELECT input, owner FROM trainings WHERE id = ?");
    if (!shared) return shared.error();
    shared->bind(1, std::string_view(input["training"].get_ref<const std::string&>()));
    auto found = shared->step();
    if (!found) return found.error();
    if (!*found) return fail(errc::not_found, "no training " + input["training"].get<std::string>());
    auto joined = nlohmann::json::parse(shared->column_text(0), nullptr, false);
    if (!joined.is_object() || !joined["files"].is_array()) joined = {{"files", nlohmann::json::array()}};
    for (const auto& f : input.value("files", nlohmann::json::array())) joined["files"].push_back(f);
    joined["owner"] = shared->column_text(1);  // whose stored files these are (training_data.hpp)
    return joined;
  }
  return input;
}

Result<JobDefinition> PoolStore::job_definition(const std::string& job) {
  auto st = db_.prepare("SELECT workload, spec, input, needs FROM jobs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return fail(errc::not_found, "no job " + job);
  return JobDefinition{st->column_text(0), nlohmann::json::parse(st->column_text(1), nullptr, false),
                       nlohmann::json::parse(st->column_text(2), nullptr, false), st->column_text(3)};
}

Result<void> PoolStore::record_verification(const std::string& job, bool accepted, std::int64_t verify_us,
                                            std::int64_t compute_us) {
  auto st = db_.prepare(
      "UPDATE jobs SET verified = verified + 1, rejected = rejected + ?, verify_us = verify_us + ?, "
      "compute_us = compute_us + ? WHERE id = ?");
  if (!st) return st.error();
  return st->bind(1, std::int64_t{accepted ? 0 : 1}).bind(2, verify_us).bind(3, compute_us).bind(4, std::string_view(job)).run();
}

Result<bool> PoolStore::maybe_finish(const std::string& job, std::int64_t now_ms) {
  // Index lookups on (state, job): not a count over the job's tasks. A
  // running job holds failed tasks only when it allows failures (a failed
  // task fails any other job with it): those are finished too.
  auto st = db_.prepare(
      "SELECT CASE WHEN EXISTS (SELECT 1 FROM tasks WHERE state = 'pending' AND job = ?1) OR "
      "EXISTS (SELECT 1 FROM tasks WHERE state = 'leased' AND job = ?1) THEN 1 ELSE 0 END");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  if (auto row = st->step(); !row) return row.error();
  if (st->column_int64(0) != 0) return false;
  if (auto r = finish_job(job, "done", "", now_ms); !r) return r.error();
  return true;
}

Result<void> PoolStore::finish_job(const std::string& job, const std::string& state, const std::string& reason,
                                   std::int64_t now_ms) {
  auto st = db_.prepare(
      "UPDATE jobs SET state = ?, reason = ?, finished = ? WHERE id = ? AND state = 'running' RETURNING owner");
  if (!st) return st.error();
  st->bind(1, std::string_view(state)).bind(2, std::string_view(reason)).bind(3, now_ms).bind(4, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return {};
  std::string owner = st->column_text(0);
  if (auto more = st->step(); !more) return more.error();
  auto fl = db_.prepare("UPDATE tasks SET state = 'failed', last_error = ? WHERE job = ? AND state = 'pending'");
  if (!fl) return fl.error();
  if (auto r = fl->bind(1, std::string_view("job " + state)).bind(2, std::string_view(job)).run(); !r) return r;
  auto left = balance(escrow_account(job));
  if (!left) return left.error();
  if (*left > 0) {
    auto txn = new_txn("refund", now_ms);
    if (!txn) return txn.error();
    if (auto r = entry(*txn, escrow_account(job), -*left, "refund", std::nullopt, job); !r) return r;
    if (auto r = entry(*txn, peer_account(owner), *left, "refund", std::nullopt, job); !r) return r;
  }
  return {};
}

Result<void> PoolStore::cancel_job(const std::string& job, const std::string& owner, std::int64_t now_ms) {
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();
  auto st = db_.prepare("SELECT owner, state FROM jobs WHERE id = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job));
  auto row = st->step();
  if (!row) return row.error();
  if (!*row || st->column_text(0) != owner) return fail(errc::not_found, "no job " + job + " of yours");
  if (st->column_text(1) != "running") return fail(errc::refused, "job " + job + " is already " + st->column_text(1));
  if (auto r = finish_job(job, "cancelled", "cancelled by its owner", now_ms); !r) return r;
  return tx->commit();
}

}  // namespace runsnack::pool
