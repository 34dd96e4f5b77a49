#pragma once
// The pool's state in its own SQLite database (pool.db in the state folder,
// or `--db sqlite:PATH`) or on a PostgreSQL server (`--db postgres://...`,
// same schema and migrations; both through store/database.hpp): devices, jobs,
// tasks with leases, results and the double-entry ledger
// (pool/ledger_rules.hpp). Every operation that reads and then writes runs in
// one Transaction (SQLite: BEGIN IMMEDIATE), so a task is
// leased to one worker at a time and paid at most once even with several
// coordinator processes on one file.
//
// Times are unix milliseconds passed in by the caller (the clock seam).
// Thread-safety: as Database (one thread at a time). On PostgreSQL the
// read-then-write transactions hold an exclusive advisory lock and claims a
// shared one with FOR UPDATE SKIP LOCKED (store/database.hpp).
//
// Implemented by concern in pool_store*.cpp (the list is at the top of
// pool_store.cpp).

#include "core/error.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/scheduler.hpp"
#include "store/database.hpp"
#include "pool/task_result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace runsnack::pool {

struct PoolPolicy {
  int max_attempts = 3;                      // failures reported by devices with a record before a task fails
  std::int64_t lease_ms = 30'000;            // renewed by every message from the worker
  std::int64_t exclude_after = 3;            // wrong results before a device gets no more work
  std::int64_t first_leases = kFirstLeases;  // leases a device without results may hold (scheduler.hpp lease_cap)
  std::int64_t fresh_leases_per_network = kFreshLeasesPerNetwork;  // ... all such devices of one network
  double max_price = 0;                      // credits per device-hour a worker may ask (0: any)
  std::int64_t give_up_ms = 60'000;          // a job no online worker may serve fails after this (stall_watch.hpp)
  // A shard whose copies want a device on another network (or another peer)
  // waits this long for one to come online before it is delivered unverified.
  std::int64_t independent_wait_ms = 20'000;
};

// How a job treats shards whose command exits non-zero (`pool submit --retries N --allow-failures`).
struct JobRules {
  int retries = 0;              // runs on other peers after a non-zero exit
  bool allow_failures = false;  // failed shards do not fail the job: it ends done with them reported
  std::string needs;            // what a device must run to take its tasks (JobPlan::needs); '' = native only
};

// An attempt whose command exited non-zero.
struct ShardFailure {
  std::int64_t shard = 0, attempt = 0, exit_code = 0, time_ms = 0;
  std::string peer, stderr_tail;
};

// What shard_failed() did with the failed attempt.
struct FailOutcome {
  bool recorded = false;      // the attempt was the peer's live lease (else nothing changed)
  bool retried = false;       // the shard runs again on another peer
  bool job_finished = false;  // the job ended (failed, or done with failures)
};

// The online devices by price, for telling a submitter without a budget what it would get.
struct OnlinePrices {
  std::int64_t free = 0, priced = 0;
  double cheapest = 0;  // of the priced ones, credits per device-hour
};

struct DeviceInfo {
  std::string id, peer, kind, name;
  double score = 0, price = 0;
  bool online = false;
  std::int64_t tasks_done = 0;
  std::int64_t valid = 0, invalid = 0;   // results checked right / caught wrong
  std::int64_t leases_lost = 0;          // leases that ended without a result (scheduler.hpp LeaseRecord)
  bool trusted = false;                  // its peer is vouched for by the operator (`pool trust`)
  std::optional<std::string> excluded;  // why it gets no more work
  std::optional<std::int64_t> max_task_seconds;  // its cap per task (device_runs.hpp), if it stated one
};

struct LeasedTask {
  std::string id, job;
  std::int64_t shard = 0, shards = 0, attempt = 0;
  std::string workload;
  std::string needs;    // the job's (JobRules::needs): what a device must run to take it
  nlohmann::json spec;  // the job's spec, as its workload reads it
};

struct JobDefinition {
  std::string workload;
  nlohmann::json spec, input;
  std::string needs;  // JobRules::needs
};

// A training job (pool/trainer.hpp): its rounds run as jobs of the workload "train-round".
struct TrainingRow {
  std::string id, owner, state, reason;
  nlohmann::json spec, metrics;  // metrics: one object per finished round
  Micro budget = 0, spent = 0;   // spent: by the finished rounds' jobs
  std::int64_t round = 0;        // rounds finished
  std::int64_t created_ms = 0;
  std::optional<std::int64_t> finished_ms;
  std::optional<std::string> round_job;  // the running round's job
  std::string weights, momentum;         // safetensors bytes (momentum: empty before the first step)
  bool awaiting_data = false;            // its files are still being uploaded (training_data.hpp)
};

// A training's file as the store holds it, by owner and content (training_data.hpp).
struct TrainingBlob {
  std::uint64_t size = 0, stored = 0;  // stored: the bytes uploaded so far, in order
  bool complete = false;               // all of it, checked against its digest
};

struct TaskRef {
  std::string job;
  std::int64_t shard = 0;
};


struct JobStatus {
  std::string id, owner, state, reason, workload;
  std::int64_t tasks = 0, pending = 0, leased = 0, done = 0, failed = 0;
  Micro budget = 0, spent = 0;
  nlohmann::json info = nlohmann::json::object();  // what the workload shows with the job
  std::int64_t verified = 0, rejected = 0, verify_us = 0, compute_us = 0;  // checks by computation
  JobRules rules;
  std::int64_t unverified = 0;  // shards delivered without a quorum of independent parties
};

// Read-only views for the dashboard (pool/pool_snapshot.hpp).
struct LedgerRecord {
  std::int64_t txn = 0, time_ms = 0;
  std::string account, kind, job;
  Micro amount = 0;
  std::optional<std::string> task;
};

// Credits that flowed by kind (each the sum of that kind's positive entries),
// and what escrow accounts hold now.
struct LedgerTotals {
  Micro minted = 0, escrowed = 0, paid = 0, refunded = 0, held = 0;
};

// One result to accept (PoolStore::complete_many); `result` must outlive the call.
struct Completion {
  std::string task;
  std::int64_t attempt = 0;
  const TaskResult* result = nullptr;
  std::int64_t arrived_ms = 0;  // when the result came (0: now); a result held for a quorum is paid up to then
};

struct CompleteOutcome {
  bool accepted = false;
  bool job_finished = false;  // this result was the job's last
  std::string why;   // when not accepted
  Micro paid = 0;
};

class PoolStore {
 public:
  // Opens and migrates; path ":memory:" for tests.
  static Result<PoolStore> open(const std::filesystem::path& path, PoolPolicy policy);
  // The same schema on a PostgreSQL server (postgres://...): several
  // coordinator processes may share one database.
  static Result<PoolStore> open_postgres(const std::string& url, PoolPolicy policy);
  const PoolPolicy& policy() const { return policy_; }

  Result<Micro> balance(const std::string& account);
  // Credits are minted only explicitly (pool_store_bank.cpp): by the
  // coordinator's operator (`pool grant PEER N`) ...
  Result<void> grant_credits(const std::string& peer, Micro amount, std::int64_t now_ms);
  // ... or carried by a submit link (`pool link --credits N`): offered with
  // the link's grant, minted once, to the first peer whose session uses it.
  Result<void> offer_link_credits(const std::string& grant_id, Micro amount);
  // The credits minted for `peer` now (0: none offered, or claimed before).
  Result<Micro> claim_link_credits(const std::string& grant_id, const std::string& peer, std::int64_t now_ms);
  // One transaction around several operations (their own transactions
  // become savepoints): a claim of several tasks, a batch of results.
  // Lock::shared: claims only (PostgreSQL's shared lock).
  Result<Transaction> batch(Transaction::Lock lock) { return Transaction::begin(db_, lock); }
  Result<std::vector<LedgerEntry>> entries_for(const std::string& account);

  // A worker's device, online, at its price (credits per device-hour), from
  // `network` (scheduling::network_of its session's address); its score is 0
  // until set_device_score().
  Result<std::string> register_device(const std::string& peer, const std::string& kind, const std::string& name,
                                      double price, std::int64_t now_ms,
                                      std::optional<std::int64_t> max_task_seconds = std::nullopt,
                                      const std::string& network = "");
  Result<void> set_device_online(const std::string& peer, bool online);
  // The score the coordinator measured (pool/calibration.hpp); a registered
  // device has none (0) until then and may not claim.
  Result<void> set_device_score(const std::string& device, double score);
  Result<std::vector<DeviceInfo>> devices();
  Result<double> device_score(const std::string& device);
  Result<OnlinePrices> online_prices();
  // The learned scheduler's saved state (pool/scheduling/), if any.
  Result<void> save_scheduler_state(const nlohmann::json& state);
  Result<std::optional<nlohmann::json>> scheduler_state();

  // Escrows `budget` from the owner's balance; refused (with the balance in
  // the message) when it is too small. A job without a budget goes only to
  // free devices (price 0); a priced device takes tasks only of jobs whose
  // escrow holds credit, and a job whose escrow runs dry with work left fails.
  Result<std::string> create_job(const std::string& owner, const std::string& workload, const nlohmann::json& spec,
                                 const nlohmann::json& input, const nlohmann::json& info, std::int64_t shards,
                                 Micro budget, std::int64_t now_ms, const JobRules& rules = {});
  Result<nlohmann::json> job_input(const std::string& job);
  Result<JobDefinition> job_definition(const std::string& job);
  Result<std::optional<TaskRef>> task_ref(const std::string& task);
  // Reputation: counts a checked result of `device`; a wrong one is
  // remembered so the task goes to another peer, and the device is
  // excluded once `exclude_after` of its results were wrong. Returns the
  // exclusion's reason when this check excluded it.
  Result<std::optional<std::string>> record_check(const std::string& device, const std::string& task,
                                                  const std::string& peer, bool valid, const std::string& reason,
                                                  std::int64_t exclude_after, std::int64_t now_ms);
  // Why the device is excluded, or nothing.
  Result<std::optional<std::string>> exclusion(const std::string& device);
  // Its results checked and found right so far (0 for an unknown device).
  Result<std::int64_t> valid_results(const std::string& device);
  // The operator vouches for `peer` (`pool trust`), or stops to.
  Result<void> trust_peer(const std::string& peer, bool trusted, std::int64_t now_ms);
  Result<bool> peer_trusted(const std::string& peer);
  // Whether `peer` may vouch for a quorum: trusted, or a device of its with
  // at least `checks` valid checks on record (pool/replication.hpp).
  Result<bool> vouched_for(const std::string& peer, std::int64_t checks);
  // Online peers that may vouch (at most `limit`).
  Result<std::set<std::string>> vouched_online_peers(std::int64_t checks, std::int64_t limit);
  // Counts one result checked by computation (and its cost) on the job.
  Result<void> record_verification(const std::string& job, bool accepted, std::int64_t verify_us,
                                   std::int64_t compute_us);
  // Pending tasks of running jobs, counted up to `at_most` (the caller only
  // needs to know whether there are more than its waiting devices).
  Result<std::int64_t> pending_count(std::int64_t at_most = 1'000'000);
  // Leases the next pending task to `device` of `peer` (of `job` only, when
  // given), or nothing. `runs`: DeviceRuns::sql_list() of the device; only
  // jobs whose needs it lists are taken ("*": any job).
  Result<std::optional<LeasedTask>> claim(const std::string& device, const std::string& peer, std::int64_t now_ms,
                                          const std::optional<std::string>& job = std::nullopt,
                                          const std::string& runs = "*");
  // Leases up to `max` pending tasks at once (oldest job first, lowest shards
  // first, as claim() one after another would): one statement per job
  // touched, not one per task. `prefer_shard` first when pending (a training's
  // device takes the shard whose data it keeps).
  Result<std::vector<LeasedTask>> claim_many(const std::string& device, const std::string& peer, std::int64_t now_ms,
                                             std::int64_t max, const std::optional<std::string>& job = std::nullopt,
                                             const std::string& runs = "*",
                                             std::optional<std::int64_t> prefer_shard = std::nullopt);
  // Running jobs with pending tasks, oldest first (at most `limit`), with
  // their pending count (counted up to `count_limit`) and their info.
  struct PendingJobRow {
    std::string id, workload;
    std::int64_t pending = 0;
    nlohmann::json info;
  };
  // Only tasks `device` of `peer` may run count (a copy is not for the peers
  // of the shard's other copies, a task not for a peer that got it wrong, a
  // job without credit not for a priced device, a job only for a device
  // whose `runs` (as claim()) lists its needs).
  Result<std::vector<PendingJobRow>> pending_jobs(std::int64_t limit, std::int64_t count_limit, const std::string& peer,
                                                  const std::string& device, const std::string& runs = "*");
  // Renews the deadlines of the leases `peer` holds that have less than
  // three quarters of a lease left (the others need no write yet).
  Result<void> heartbeat(const std::string& peer, std::int64_t now_ms);
  // Accepts a result for (task, attempt) from `peer` when that lease is the
  // live one; pays the worker once and ends the job when it was the last.
  // A device is paid for time once: from the later of the lease's start and
  // the end of its last paid result, to the result's arrival (`arrived_ms`,
  // 0: now), at the lease's terms; tasks leased together are not each paid
  // the batch's whole time.
  Result<CompleteOutcome> complete(const std::string& task, std::int64_t attempt, const std::string& peer,
                                   const TaskResult& result, std::int64_t now_ms, std::int64_t arrived_ms = 0);
  // complete() for several results of `peer` in one transaction with a fixed
  // number of statements (set-based, not one round of statements per
  // result): the outcomes, in order, are those of completing them one after
  // another (a duplicate of an accepted task is refused, payments come out
  // of the escrow in order, the job's last result finishes it).
  Result<std::vector<CompleteOutcome>> complete_many(const std::string& peer, std::span<const Completion> results,
                                                     std::int64_t now_ms);
  // The attempt's command exited non-zero (pool_store_failures.cpp): the
  // failure is recorded for the submitter (exit code, stderr's tail), never
  // paid; the shard runs again on another peer while the job's retries
  // allow (not when `final`: a quorum decided the failure), else it fails,
  // and with it the job unless the job allows failures.
  Result<FailOutcome> shard_failed(const std::string& task, std::int64_t attempt, const std::string& peer,
                                   std::int64_t exit_code, const std::string& stderr_tail, bool final,
                                   std::int64_t now_ms);
  Result<std::vector<ShardFailure>> failures(const std::string& job, std::int64_t limit);
  // One more shard of the job was delivered without an independent quorum.
  Result<void> record_unverified(const std::string& job);
  // The attempt failed by the worker's word or a refused result: requeued,
  // or failed once max_attempts such failures count (failure_counts).
  Result<void> fail_attempt(const std::string& task, std::int64_t attempt, const std::string& peer,
                            const std::string& reason, std::int64_t now_ms);
  // Gives back a lease just made by a claim, as if it had not been made.
  Result<void> unclaim(const std::string& task, std::int64_t attempt);
  // Why attempt `attempt` of `task` is no longer `peer`'s lease (the task failed or was given up
  // with its job, went back to the queue, or to someone else); nothing while it still is.
  Result<std::optional<std::string>> lease_lost(const std::string& task, std::int64_t attempt, const std::string& peer);
  // A capped device hands back a lease of `peer`'s leased at or before
  // `started_by_ms` (it ran past its cap): pending again, its try not spent.
  // The task's job, or nothing when no such lease is live.
  Result<std::optional<std::string>> abandon(const std::string& task, std::int64_t attempt, const std::string& peer,
                                             std::int64_t started_by_ms);
  // How many leases `device` (of `peer`) holds now, and its record.
  struct LeaseStanding {
    std::int64_t held = 0;
    LeaseRecord record;
  };
  Result<LeaseStanding> lease_standing(const std::string& device, const std::string& peer);
  // Leases held now by the devices of `network` that have no accepted result.
  Result<std::int64_t> fresh_leases(const std::string& network);
  // Every lease of a worker that went away: requeued, each the device's loss.
  Result<int> release_worker(const std::string& peer);
  // A worker (re)registered holding results for the tasks in `keep`: its
  // other leases are stale (e.g. granted by a coordinator that died before
  // the worker heard of them) and go back to the queue.
  Result<int> release_stale_leases(const std::string& peer, const std::vector<std::string>& keep);
  Result<int> expire_leases(std::int64_t now_ms);
  Result<void> cancel_job(const std::string& job, const std::string& owner, std::int64_t now_ms);

  // Training jobs (pool_store_training.cpp). `input` holds what every round's job reads
  // ({"files":[...]}); a round job's input {"training": ID, "files": [...]} adds its own files
  // to it (job_input joins them), so the data is stored once, not once a round.
  Result<std::string> create_training(const std::string& owner, const nlohmann::json& spec, const nlohmann::json& input,
                                      std::string_view weights, Micro budget, std::int64_t now_ms,
                                      bool awaiting_data = false);
  // Nothing when there is no such training; weights and momentum only when asked for.
  Result<std::optional<TrainingRow>> training(const std::string& id, bool with_weights);
  Result<std::vector<TrainingRow>> trainings(const std::optional<std::string>& owner, std::int64_t limit);
  // Running trainings in id order, those after `after` ("" from the first).
  Result<std::vector<std::string>> running_trainings(const std::string& after, std::int64_t limit);
  Result<std::int64_t> running_trainings_of(const std::string& owner);
  Result<void> set_round_job(const std::string& id, const std::string& job);
  // Round `round` (counted from 0) finished: its weights and momentum, its metrics, what its job
  // spent. Only once: errc::refused when the training is past it (another coordinator did it).
  Result<void> finish_round(const std::string& id, std::int64_t round, std::string_view weights,
                            std::string_view momentum, const nlohmann::json& metrics, Micro spent);
  // Ends a running training: done, failed or cancelled (by its owner: errc::refused for anyone else).
  Result<void> finish_training(const std::string& id, const std::string& state, const std::string& reason,
                               std::int64_t now_ms, const std::optional<std::string>& owner = std::nullopt);
  // A training's files by owner and content, in chunks (pool_store_training_data.cpp, training_data.hpp).
  Result<void> register_training_blob(const std::string& owner, const std::string& sha256, std::uint64_t size);
  Result<std::optional<TrainingBlob>> training_blob(const std::string& owner, const std::string& sha256);
  // Appends chunk number `chunk` where the stored part ends (`offset`); returns the bytes now stored.
  Result<std::uint64_t> append_training_chunk(const std::string& owner, const std::string& sha256, std::uint64_t offset,
                                              std::int64_t chunk, std::string_view bytes);
  Result<std::string> training_chunk(const std::string& owner, const std::string& sha256, std::int64_t chunk);
  Result<void> complete_training_blob(const std::string& owner, const std::string& sha256);
  Result<void> drop_training_blob(const std::string& owner, const std::string& sha256);  // back to 0 bytes
  // The files' sizes, registered or stored, of one owner or of everyone.
  Result<std::uint64_t> training_data_bytes(const std::optional<std::string>& owner);
  Result<void> training_data_ready(const std::string& id);
  Result<std::int64_t> incomplete_training_blobs(const std::string& owner);  // registered, not all in
  // Drops the owner's files that none of their running trainings names; returns how many.
  Result<std::int64_t> forget_training_data(const std::string& owner);

  Result<JobStatus> job_status(const std::string& job);
  Result<std::vector<JobStatus>> jobs(const std::optional<std::string>& owner);
  Result<std::optional<TaskResult>> result(const std::string& job, std::int64_t shard);
  Result<AuditReport> audit();

  // Dashboard views, read-only.
  Result<std::vector<JobStatus>> recent_jobs(std::int64_t limit);  // newest first
  Result<std::vector<LedgerRecord>> recent_entries(std::int64_t limit);  // newest first
  Result<LedgerTotals> ledger_totals();
  // Credits paid for the tasks each device finished, by device id.
  Result<std::map<std::string, Micro>> earnings_by_device();

  // Copies for a quorum (exec --replicas / --spot-check): a copy is a task
  // row past the job's shards that runs shard `of_shard`; the job is done
  // when its copies are too. `avoid_peers` never get it (nor does a peer
  // given to avoid_peer): replicas run on independent peers.
  Result<std::string> add_copy(const std::string& job, std::int64_t of_shard, const std::vector<std::string>& avoid_peers,
                               std::int64_t now_ms);
  Result<void> avoid_peer(const std::string& task, const std::string& peer, const std::string& reason, std::int64_t now_ms);
  Result<std::optional<std::int64_t>> copy_of(const std::string& task);  // the shard a copy runs, or nothing
  Result<std::vector<std::string>> copies_of(const std::string& job, std::int64_t of_shard);
  Result<std::int64_t> copy_count(const std::string& job);
  // A copy whose result lost the quorum: done without a result or payment
  // (the shard's value is decided; running it again would add nothing).
  // True when that finished the job.
  Result<bool> retire_copy(const std::string& task, const std::string& why, std::int64_t now_ms);
  // The shard's value is decided: its copies nobody has started are not
  // needed (one may be a tie break that only a peer now gone could run).
  // True when that finished the job.
  Result<bool> retire_pending_copies(const std::string& job, std::int64_t of_shard, const std::string& why,
                                     std::int64_t now_ms);

  // Jobs that may be stuck (pool_store_stalls.cpp, stall_watch.hpp).
  struct JobLoad {
    std::string job;
    std::int64_t pending = 0, leased = 0;
  };
  Result<std::vector<JobLoad>> running_job_loads(std::int64_t limit);  // oldest first
  // Peers of online devices that are not excluded (of every coordinator on the database).
  Result<std::set<std::string>> online_worker_peers();
  // A job's first `limit` pending tasks with the peers barred from each
  // (rejections: a copy of the shard, a refused result), and its leased tasks.
  struct PendingBars {
    std::string task;
    std::set<std::string> barred;  // peers
    std::string last_reason;       // why the last of them was barred
  };
  struct JobBars {
    std::vector<PendingBars> pending;
    std::vector<std::string> leased;
  };
  Result<JobBars> job_bars(const std::string& job, std::int64_t limit);
  // Ends a running job `failed` with `reason` (refunds what its escrow holds).
  Result<void> give_up_job(const std::string& job, const std::string& reason, std::int64_t now_ms);

 private:
  PoolStore(Database db, PoolPolicy policy) : db_(std::move(db)), policy_(policy) {}
  Result<std::int64_t> new_txn(const std::string& kind, std::int64_t now_ms);
  Result<void> entry(std::int64_t txn, const std::string& account, Micro amount, const std::string& kind,
                     const std::optional<std::string>& task, const std::string& job);
  // A lease that ended without a result (worker gone, lapsed, stale): the
  // task is pending again with nothing counted against it; `device` is
  // charged the loss (and excluded when its record says so).
  // Whether a failure `peer` reports for `task` counts against it (a retry
  // or an attempt spent): when its device has a record (scheduler.hpp
  // kRecordResults), or when no device with one is online to run the task
  // instead (the best evidence there is). Fresh identities are free: their
  // word alone fails nothing while a device with a record can check it.
  Result<bool> failure_counts(const std::string& task, const std::string& device, const std::string& peer);
  // Whether minting `amount` for `peer` stays within kMaxBalance and kMaxMinted (ledger_rules.hpp).
  Result<void> room_to_mint(const std::string& peer, Micro amount);
  Result<void> requeue_lost(const std::string& task, const std::string& device, const std::string& reason);
  Result<void> finish_job(const std::string& job, const std::string& state, const std::string& reason,
                          std::int64_t now_ms);
  Result<bool> maybe_finish(const std::string& job, std::int64_t now_ms);  // true: it just finished
  Result<int> release_leases(const std::string& peer, const std::vector<std::string>* keep, const std::string& reason);

  // What a lease hands out with a task; a job's workload and spec never change.
  struct JobMeta {
    std::string workload, needs;
    nlohmann::json spec;
    std::int64_t shards = 0;
  };
  Result<const JobMeta*> job_meta(const std::string& job);
  void remember_ref(const std::string& task, TaskRef ref);

  Database db_;
  PoolPolicy policy_;
  // Caches of facts that never change once written (a task's job and shard,
  // a job's spec), so a claim or a result does not look them up each time;
  // bounded (emptied when full). Valid with several coordinators too.
  std::unordered_map<std::string, JobMeta> job_meta_;
  std::unordered_map<std::string, TaskRef> task_refs_, old_task_refs_;
};

// The bytes a worker signs for a result: task, attempt, exit code, and
// SHA-256 of stdout and of the files' JSON.
std::vector<std::uint8_t> result_signing_bytes(const std::string& task, std::int64_t attempt, const TaskResult& r);

}  // namespace runsnack::pool
