#pragma once
// The "pool-worker" ops (wire.hpp draws them), one function each, without
// I/O: each takes the worker's session, the moment the message came (read
// once per message by the coordinator, stepped by hand in tests) and the
// parsed message, and returns the answer. State lives in PoolStore; this
// class keeps what the coordinator holds in memory about its workers: which
// devices wait for work and from which network, pending calibrations, the
// learned scheduler, verification (result checkers, Replication,
// KnownAnswers). Coordinator (coordinator.hpp) reads the streams and calls
// handle(); worker_ops_test.cpp drives the ops on an in-memory store.
//
// Threading: none of its own; one executor calls it, like Provider.

#include "crypto/peer_id.hpp"
#include "pool/calibration.hpp"
#include "pool/known_answers.hpp"
#include "pool/pool_store.hpp"
#include "pool/replication.hpp"
#include "pool/scheduler.hpp"
#include "pool/scheduling/scheduler.hpp"
#include "pool/device_runs.hpp"
#include "pool/workload.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace runsnack::pool {

// Tasks one claim may lease, results one message may carry.
inline constexpr std::int64_t kMaxClaimBatch = 64;
// A job with pending tasks that no device leased from for this long goes to
// any device that may run them, whatever the learned scheduler would prefer.
inline constexpr std::chrono::milliseconds kStarvedAfter{2000};
// Any message renews the worker's leases, at most this often (an explicit
// heartbeat always does), so a busy worker's claims and results do not each cost a write.
inline constexpr std::chrono::milliseconds kRenewEvery{1000};
// Jobs one device may have handed tasks back from ("abandon") and is kept
// away from at once; past this it reports overlong tasks as failed.
inline constexpr std::size_t kMaxAbandonedJobs = 64;

// {"ok": false, "error": why}
nlohmann::json refusal(const std::string& why);
std::string format_price(double credits_per_hour);

// The times one message is handled at: wall time for the store (leases,
// ledger) and waiting devices, steady time for durations (calibration,
// starvation) and the learned scheduler.
struct Moment {
  TimePoint wall{};
  std::chrono::steady_clock::time_point steady{};
  std::int64_t wall_ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(wall.time_since_epoch()).count();
  }
  double steady_s() const { return std::chrono::duration<double>(steady.time_since_epoch()).count(); }
  static Moment read() { return {std::chrono::system_clock::now(), std::chrono::steady_clock::now()}; }
};

// One worker's stream as the ops see it: who it is, and what it told us so far.
struct WorkerSession {
  PeerId consumer;      // the session's peer
  std::string peer;     // consumer.str()
  std::string address;  // where the session comes from (ServiceContext::address)
  // One audit record for this session: kind, decision, reason, detail (may be empty).
  std::function<void(const std::string&, const std::string&, const std::string&, const nlohmann::json&)> audit;
  std::string device;      // set by register
  DeviceRuns runs;         // set by register: which jobs its tasks may come from
  std::optional<std::int64_t> max_task_seconds;  // set by register: its cap per task, if any
  std::string public_key;  // raw Ed25519 key, set by register
  // The binary frames that came after the current message, taken by its
  // results in order (wire.hpp).
  std::vector<std::string> frames;
  std::size_t next_frame = 0;
  // Binary frames to follow the answer to the current message ("input" with "frames": a
  // worker that reads them gets its files raw, not as base64: wire.hpp).
  std::vector<std::string> reply_frames;
  std::chrono::steady_clock::time_point last_renewal{};
  // The shard of the last training round it took: the next round offers it that shard first,
  // whose data it keeps (a round then moves weights, not data).
  std::optional<std::int64_t> training_shard;
};

class WorkerOps {
 public:
  WorkerOps(PoolStore& store, std::function<void(const nlohmann::json&)> on_event, std::uint64_t seed);
  WorkerOps(const WorkerOps&) = delete;
  WorkerOps& operator=(const WorkerOps&) = delete;

  // One message: renews the worker's leases (kRenewEvery) and answers its op.
  nlohmann::json handle(WorkerSession& s, const Moment& now, const nlohmann::json& req);
  // A worker stream opened / ended: forgets what was kept for it and
  // requeues its leases (returns how many).
  void worker_connected() { ++workers_online_; }
  int worker_left(WorkerSession& s, const Moment& now);

  // The ops (handle() dispatches; "register first" is its check).
  nlohmann::json register_worker(WorkerSession& s, const Moment& now, const nlohmann::json& req);
  nlohmann::json calibrated(WorkerSession& s, const Moment& now, const nlohmann::json& req);
  nlohmann::json claim(WorkerSession& s, const Moment& now, const nlohmann::json& req);
  // A heartbeat naming the task it runs is answered "stop" with why once its lease is no longer
  // the worker's: a round closed at its deadline, a cancelled job (its script is then stopped).
  nlohmann::json heartbeat(const WorkerSession& s, const nlohmann::json& req);
  // worker_inputs.cpp: a job's input for one of its tasks, and a stored file a chunk at a time.
  nlohmann::json input(WorkerSession& s, const nlohmann::json& req);
  nlohmann::json input_part(WorkerSession& s, const nlohmann::json& req);
  nlohmann::json failed(WorkerSession& s, const Moment& now, const nlohmann::json& req);
  // A capped device hands back a task that ran past its cap: the task is
  // pending again with its try unspent, nobody's record moves, and the
  // device is offered nothing more of that job.
  nlohmann::json abandon(WorkerSession& s, const Moment& now, const nlohmann::json& req);
  // A checked result that passed is completed at once, or, with `deferred`
  // (inside a "results" batch), queued there and answered null.
  struct DeferredResult {
    std::string task;
    std::int64_t attempt = 0;
    TaskResult result;
  };
  nlohmann::json result(WorkerSession& s, const Moment& now, const nlohmann::json& req,
                        std::vector<DeferredResult>* deferred = nullptr);
  nlohmann::json results(WorkerSession& s, const Moment& now, const nlohmann::json& req);

  // What other parts of the coordinator (client ops, maintenance) read.
  void use_learned_scheduler(const Moment& now);
  nlohmann::json learned_estimates(const std::string& device) const;
  void save_learned();
  nlohmann::json verification_method(const std::string& job);
  std::optional<std::string> network_of_device(const std::string& device) const;
  Replication& replication() { return replication_; }
  // The job ended or was given up: drop what was kept for it.
  void forget_job_state(const std::string& job);

 private:
  // The learned policy's answer for a claim: the job to claim from (and its
  // --prefer), or a reply telling the worker to wait.
  struct LearnedChoice {
    std::string job;
    scheduling::Preference preference = scheduling::Preference::balanced;
  };
  std::variant<LearnedChoice, nlohmann::json> learned_choice(const WorkerSession& s, const Moment& now);
  void learned_finished(const std::string& task, const std::string& device, scheduling::Outcome outcome,
                        const Moment& now);
  // Whether `s` may be offered tasks of `job`: not one it abandoned a task
  // of, nor one whose tasks the learned scheduler expects to run past its cap.
  bool may_take(const WorkerSession& s, const std::string& job, const std::string& workload) const;
  // How many more leases the device may take now (<= 0: none).
  Result<std::int64_t> lease_room(const WorkerSession& s);
  // A claim of an unproven device: a known-answer task, or nothing.
  std::optional<nlohmann::json> known_answer_claim(const WorkerSession& s);
  // The answer to a known-answer task, judged against the known one.
  nlohmann::json known_answer_result(const KnownAnswers::Issued& issued, const std::string& task, const WorkerSession& s,
                                     const TaskResult& result, const Moment& now);
  // A run that exited non-zero: a failed shard (PoolStore::shard_failed).
  nlohmann::json shard_failed(const std::string& task, std::int64_t attempt, const WorkerSession& s,
                              const TaskResult& result, const Moment& now);
  // A checked result of `device` (right or wrong): reputation, exclusion, audit.
  void record_check(const std::string& device, const std::string& task, const std::string& peer, bool valid,
                    const std::string& why, const WorkerSession& s, const Moment& now);
  // The networks of the devices asking for work now, but `device`'s.
  std::vector<std::string> free_networks(const std::string& device, const Moment& now) const;
  // What follows a result's completion (progress, events) and the worker's answer.
  nlohmann::json completed(const std::string& task, const std::string& peer, const TaskResult& result,
                           const CompleteOutcome& outcome);
  // The job's result checker, made on first use and kept (nullptr: none).
  ResultChecker* checker_for(const std::string& job);
  // Checks a result by computation when its workload can (else nothing); counts the cost.
  std::optional<Verdict> verify(const std::string& task, const TaskResult& result);
  // The job of `task` ended: drop what was kept for it.
  void forget_job(const std::string& task);
  // The workload's event for an accepted result (the render preview's tiles).
  void publish_progress(const std::string& task, const TaskResult& result);

  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  std::map<std::string, WaitingDevice> waiting_;
  std::map<std::string, TimePoint> found_nothing_;  // device -> when its claim found nothing
  std::optional<scheduling::Scheduler> learned_;
  std::int64_t workers_online_ = 0;  // open worker streams
  std::map<std::string, std::unique_ptr<ResultChecker>> checkers_;
  std::map<std::string, nlohmann::json> methods_;  // job -> its verification method (small)
  std::map<std::string, std::pair<const Workload*, nlohmann::json>> specs_;  // running jobs' workload and spec
  std::map<std::string, std::chrono::steady_clock::time_point> job_progress_;  // job -> its last lease (or first sight)
  std::map<std::string, std::string> networks_;  // device -> network of its worker's session
  std::set<std::string> proven_;                 // devices with a valid checked result on record
  std::map<std::string, std::set<std::string>> abandoned_;  // device -> jobs it handed a task back from
  // Devices registered on this coordinator whose calibration answer is still due.
  struct PendingCalibration {
    CalibrationChallenge challenge;
    double hint = 0, price = 0;
    std::chrono::steady_clock::time_point issued;
  };
  std::map<std::string, PendingCalibration> calibrations_;
  std::mt19937_64 challenge_rng_;
  KnownAnswers known_answers_;  // hidden known-answer tasks for unproven devices
  Replication replication_;     // exec --replicas / --spot-check (after on_event_, which it copies)
};

}  // namespace runsnack::pool
