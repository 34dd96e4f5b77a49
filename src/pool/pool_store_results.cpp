// PoolStore: results: what a worker signs, accepting results (one or a
// batch, in a fixed number of statements) with each one's payment out of
// its job's escrow, and reading a shard's result back.
#include "pool/pool_store.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

namespace runsnack::pool {
namespace {

std::string hex(std::span<const std::uint8_t> bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) out += d[b >> 4], out += d[b & 15];
  return out;
}

std::string sha256_hex(std::string_view data) {
  std::array<std::uint8_t, 32> md{};
  unsigned len = 0;
  EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
  return hex(md);
}

// "?F, ?F+1, ..." : n numbered parameters from F (SQLite and PostgreSQL alike).
std::string param_list(std::size_t n, std::size_t first = 1) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += '?';
    out += std::to_string(first + i);
  }
  return out;
}

// "(?1, ?2), (?3, ?4), ..." : `rows` rows of `cols` numbered parameters.
std::string value_rows(std::size_t rows, std::size_t cols) {
  std::string out;
  for (std::size_t r = 0; r < rows; ++r) {
    if (r) out += ", ";
    out += '(' + param_list(cols, 1 + r * cols) + ')';
  }
  return out;
}

}  // namespace

std::vector<std::uint8_t> result_signing_bytes(const std::string& task, std::int64_t attempt, const TaskResult& r) {
  // v2 when files travel as binary frames: the files list names them by
  // index, and each frame's own hash follows.
  std::string text = r.frames.empty() ? "runsnack-pool-result-v1\n" : "runsnack-pool-result-v2\n";
  text += task + "\n" + std::to_string(attempt) + "\n" + std::to_string(r.exit_code) + "\n" + sha256_hex(r.stdout_data) + "\n" +
          sha256_hex(r.files.dump());
  for (const auto& f : r.frames) text.append(1, '\n').append(sha256_hex(f));
  if (!r.stderr_tail.empty()) text += "\nstderr " + sha256_hex(r.stderr_tail);  // only failed runs carry one
  return {text.begin(), text.end()};
}

Result<CompleteOutcome> PoolStore::complete(const std::string& task, std::int64_t attempt, const std::string& peer,
                                            const TaskResult& result, std::int64_t now_ms,
                                            std::int64_t arrived_ms) {
  const Completion one{task, attempt, &result, arrived_ms};
  auto out = complete_many(peer, {&one, 1}, now_ms);
  if (!out) return out.error();
  return std::move(out->front());
}

Result<std::vector<CompleteOutcome>> PoolStore::complete_many(const std::string& peer,
                                                              std::span<const Completion> results,
                                                              std::int64_t now_ms) {
  std::vector<CompleteOutcome> out(results.size());
  if (results.empty()) return out;
  auto tx = Transaction::begin(db_);
  if (!tx) return tx.error();

  // 1. Every named task's lease, job and device, in one read.
  struct Lease {
    std::string state, worker, job, job_state, device;
    std::int64_t attempts = 0, lease_start = 0, shard = 0;
    std::int64_t paid_from = 0, paid_to = 0;  // the device time this result is paid for
    double score = 0, price = 0;  // the lease's terms, fixed when it was given
    Micro escrow = 0;           // what the job's escrow holds
    bool job_pending = false;   // the job has pending tasks (so cannot finish in this batch)
  };
  std::unordered_map<std::string, Lease> leases;
  std::map<std::string, std::int64_t> paid_until;  // device -> end of its last paid result
  {
    std::vector<std::string> ids;
    for (const auto& r : results)
      if (std::find(ids.begin(), ids.end(), r.task) == ids.end()) ids.push_back(r.task);
    auto st = db_.prepare(
        "SELECT t.id, t.state, t.attempts, t.worker, t.lease_start, t.job, j.state, "
        "CAST(COALESCE(t.lease_score, 0) AS BIGINT), CAST(COALESCE(t.lease_price, 0) AS BIGINT), t.shard, "
        "(SELECT b.amount FROM balances b WHERE b.account = ?1 || t.job), "
        "CASE WHEN EXISTS (SELECT 1 FROM tasks p WHERE p.state = 'pending' AND p.job = t.job) THEN 1 ELSE 0 END, "
        "t.device, (SELECT d.paid_until FROM devices d WHERE d.id = t.device) "
        "FROM tasks t JOIN jobs j ON j.id = t.job WHERE t.id IN (" + param_list(ids.size(), 2) + ")");
    if (!st) return st.error();
    st->bind(1, std::string_view(escrow_account("")));
    for (std::size_t i = 0; i < ids.size(); ++i) st->bind(static_cast<int>(i + 2), std::string_view(ids[i]));
    auto read = for_each_row(*st, [&](Statement& r) {
      Lease l;
      l.state = r.column_text(1), l.attempts = r.column_int64(2), l.worker = r.column_optional_text(3).value_or("");
      l.lease_start = r.column_optional_int64(4).value_or(now_ms), l.job = r.column_text(5);
      l.job_state = r.column_text(6), l.score = static_cast<double>(r.column_int64(7));
      l.price = static_cast<double>(r.column_int64(8)) / 1000.0;
      l.shard = r.column_int64(9);
      l.escrow = r.column_int64(10);
      l.job_pending = r.column_int64(11) != 0;
      l.device = r.column_optional_text(12).value_or("");
      if (l.device.empty()) l.device = "peer:" + l.worker;
      paid_until.emplace(l.device, r.column_optional_int64(13).value_or(0));
      leases.emplace(r.column_text(0), std::move(l));
    });
    if (!read) return read.error();
  }

  // 2. Which are accepted, in order (an accepted task is done for the ones after it).
  std::vector<std::size_t> accepted;
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto it = leases.find(results[i].task);
    if (it == leases.end()) {
      out[i].why = "no such task";
      continue;
    }
    Lease& l = it->second;
    if (l.state != "leased") out[i].why = "task is " + l.state;
    else if (l.attempts != results[i].attempt || l.worker != peer) out[i].why = "lease is no longer yours";
    else if (l.job_state != "running") out[i].why = "job is " + l.job_state;
    else l.state = "done", accepted.push_back(i);
  }
  if (accepted.empty()) return out;

  // The device time each is paid for: from the later of its lease's start and
  // the end of the device's last paid result, to the result's arrival. Tasks
  // leased together and returned together are not each paid the batch's
  // whole time; a result held for a quorum is not paid for the wait.
  for (std::size_t i : accepted) {
    Lease& l = leases[results[i].task];
    std::int64_t& until = paid_until[l.device];
    const std::int64_t arrived = results[i].arrived_ms > 0 ? std::min(results[i].arrived_ms, now_ms) : now_ms;
    l.paid_to = std::max(arrived, l.lease_start);
    l.paid_from = std::min(std::max(l.lease_start, until), l.paid_to);
    until = std::max(until, l.paid_to);
  }

  // 3. The tasks done and their results.
  {
    auto up = db_.prepare("UPDATE tasks SET state = 'done' WHERE id IN (" + param_list(accepted.size()) +
                          ") AND state = 'leased' RETURNING id");
    if (!up) return up.error();
    for (std::size_t k = 0; k < accepted.size(); ++k) up->bind(static_cast<int>(k + 1), std::string_view(results[accepted[k]].task));
    std::size_t changed = 0;
    if (auto r = for_each_row(*up, [&](Statement&) { ++changed; }); !r) return r.error();
    if (changed != accepted.size()) return fail(errc::internal, "a result's task changed while it was accepted");
    // With the terms the attempt was leased at: audit-ledger checks its payment against them.
    auto ins = db_.prepare(
        "INSERT INTO results (task, worker, exit_code, stdout, files, signature, received, lease_price, lease_score, "
        "lease_start, paid_from, paid_to) VALUES " + value_rows(accepted.size(), 12));
    if (!ins) return ins.error();
    for (std::size_t k = 0; k < accepted.size(); ++k) {
      const Completion& c = results[accepted[k]];
      const TaskResult& r = *c.result;
      const Lease& l = leases[c.task];
      const int p = static_cast<int>(k * 12);
      ins->bind(p + 1, std::string_view(c.task)).bind(p + 2, std::string_view(peer)).bind(p + 3, r.exit_code);
      ins->bind_blob(p + 4, {reinterpret_cast<const std::uint8_t*>(r.stdout_data.data()), r.stdout_data.size()});
      ins->bind(p + 5, std::string_view(r.files.dump())).bind(p + 6, std::string_view(r.signature)).bind(p + 7, now_ms);
      ins->bind(p + 8, static_cast<std::int64_t>(std::llround(l.price * 1000))).bind(p + 9, static_cast<std::int64_t>(l.score));
      ins->bind(p + 10, l.lease_start).bind(p + 11, l.paid_from).bind(p + 12, l.paid_to);
    }
    if (auto r = ins->run(); !r) return r.error();
    // Each device's record grows by the results accepted (its lease cap, pool/scheduler.hpp).
    std::map<std::string, std::int64_t> completed;
    for (std::size_t i : accepted) ++completed[leases[results[i].task].device];
    auto mark = db_.prepare(
        "UPDATE devices SET paid_until = CASE WHEN paid_until < ?1 THEN ?1 ELSE paid_until END, "
        "completed = completed + ?3 WHERE id = ?2");
    if (!mark) return mark.error();
    for (const auto& [device, until] : paid_until) {
      if (device.starts_with("peer:")) continue;
      mark->reset();
      mark->bind(1, until).bind(2, std::string_view(device)).bind(3, completed[device]);
      if (auto r = mark->run(); !r) return r.error();
    }
  }

  // 4. Each payment out of its job's escrow, in order (never more than is left).
  std::vector<std::string> jobs;  // touched, in order of their last accepted result
  for (std::size_t i : accepted) {
    const std::string& job = leases[results[i].task].job;
    if (auto it = std::find(jobs.begin(), jobs.end(), job); it != jobs.end()) jobs.erase(it);
    jobs.push_back(job);
  }
  std::map<std::string, Micro> left;  // escrow account -> what it holds
  for (std::size_t i : accepted) {
    const Lease& l = leases[results[i].task];
    left.emplace(escrow_account(l.job), l.escrow);
  }
  std::vector<std::size_t> paid;
  std::map<std::string, Micro> moved;  // account -> its change
  for (std::size_t i : accepted) {
    const Lease& l = leases[results[i].task];
    Micro& have = left[escrow_account(l.job)];
    Micro charge = task_charge(l.price, l.score, std::chrono::milliseconds(l.paid_to - l.paid_from), have);
    have -= charge;
    out[i].paid = charge;
    if (charge > 0) {
      paid.push_back(i);
      moved[escrow_account(l.job)] -= charge;
      moved[peer_account(peer)] += charge;
    }
  }

  // 5. One ledger transaction per payment (escrow to provider), all in three statements.
  if (!paid.empty()) {
    std::string rows;
    for (std::size_t k = 0; k < paid.size(); ++k) rows += (k ? ", " : "") + std::string("('payment', ?1)");
    auto tx_ins = db_.prepare("INSERT INTO ledger_txns (kind, time) VALUES " + rows + " RETURNING id");
    if (!tx_ins) return tx_ins.error();
    tx_ins->bind(1, now_ms);
    // Every row is ('payment', now): which payment gets which id does not matter.
    auto txns = read_rows(*tx_ins, [](Statement& r) { return r.column_int64(0); });
    if (!txns) return txns.error();
    if (txns->size() != paid.size()) return fail(errc::internal, "ledger transactions not all made");
    std::sort(txns->begin(), txns->end());
    auto led = db_.prepare("INSERT INTO ledger (txn, account, amount, kind, task, job) VALUES " +
                           value_rows(2 * paid.size(), 6));
    if (!led) return led.error();
    int p = 0;
    for (std::size_t k = 0; k < paid.size(); ++k) {
      const Completion& c = results[paid[k]];
      const std::string& job = leases[c.task].job;
      const Micro charge = out[paid[k]].paid;
      for (const auto& [account, amount] : {std::pair{escrow_account(job), -charge}, std::pair{peer_account(peer), charge}}) {
        led->bind(p + 1, (*txns)[k]).bind(p + 2, std::string_view(account)).bind(p + 3, amount);
        led->bind(p + 4, std::string_view("payment")).bind(p + 5, std::string_view(c.task)).bind(p + 6, std::string_view(job));
        p += 6;
      }
    }
    if (auto r = led->run(); !r) return r.error();
    // The kept balances, one row per account (a row may change once per statement).
    auto bal = db_.prepare("INSERT INTO balances (account, amount) VALUES " + value_rows(moved.size(), 2) +
                           " ON CONFLICT (account) DO UPDATE SET amount = balances.amount + excluded.amount");
    if (!bal) return bal.error();
    p = 0;
    for (const auto& [account, amount] : moved) {
      bal->bind(p + 1, std::string_view(account)).bind(p + 2, amount);
      p += 2;
    }
    if (auto r = bal->run(); !r) return r.error();
  }

  // 6. A job whose last task this was ends (its unused escrow returns). One
  // that had pending tasks still has them: claims wait for this transaction.
  // One whose escrow these payments emptied with work left fails: no priced
  // device would take its tasks, and none may work for nothing.
  for (const auto& job : jobs) {
    const bool had_pending = std::any_of(accepted.begin(), accepted.end(), [&](std::size_t i) {
      const Lease& l = leases[results[i].task];
      return l.job == job && l.job_pending;
    });
    if (left.count(escrow_account(job)) && left[escrow_account(job)] <= 0 && moved.count(escrow_account(job))) {
      auto open = maybe_finish(job, now_ms);  // done when this was its last task
      if (!open) return open.error();
      if (!*open) {
        if (auto r = finish_job(job, "failed", "its budget is spent with tasks left: submit them again with a larger --budget", now_ms); !r)
          return r.error();
      }
      for (auto k = accepted.rbegin(); k != accepted.rend(); ++k)
        if (leases[results[*k].task].job == job) {
          out[*k].job_finished = true;
          break;
        }
      continue;
    }
    if (had_pending) continue;
    auto finished = maybe_finish(job, now_ms);
    if (!finished) return finished.error();
    if (!*finished) continue;
    for (auto k = accepted.rbegin(); k != accepted.rend(); ++k)
      if (leases[results[*k].task].job == job) {
        out[*k].job_finished = true;
        break;
      }
  }
  if (auto r = tx->commit(); !r) return r.error();
  for (std::size_t i : accepted) {
    out[i].accepted = true;
    const Lease& l = leases[results[i].task];
    remember_ref(results[i].task, TaskRef{l.job, l.shard});
  }
  return out;
}

Result<std::optional<TaskResult>> PoolStore::result(const std::string& job, std::int64_t shard) {
  auto st = db_.prepare(
      "SELECT r.exit_code, r.stdout, r.files, r.signature FROM results r JOIN tasks t ON t.id = r.task "
      "WHERE t.job = ? AND t.shard = ?");
  if (!st) return st.error();
  st->bind(1, std::string_view(job)).bind(2, shard);
  auto row = st->step();
  if (!row) return row.error();
  if (!*row) return std::optional<TaskResult>{};
  TaskResult r;
  r.exit_code = st->column_int64(0);
  auto blob = st->column_blob(1);
  r.stdout_data.assign(blob.begin(), blob.end());
  r.files = nlohmann::json::parse(st->column_text(2), nullptr, false);
  r.signature = st->column_text(3);
  return std::optional<TaskResult>(std::move(r));
}

}  // namespace runsnack::pool
