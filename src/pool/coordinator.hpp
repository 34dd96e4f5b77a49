#pragma once
// The pool coordinator's stream handlers: it is a Provider (same sessions,
// grants and revocation) with two services, "pool-worker" for workers that
// came by the join link and "pool-client" for consumers that came by the
// submit link (wire.hpp for the message shapes). State lives in PoolStore;
// this class keeps which devices are waiting for work and from which
// network, runs the learned scheduler (the default) or part 1's
// fastest-first policy (pool/scheduler.hpp), verification (Freivalds
// checkers, Replication, KnownAnswers) and lease expiry.
//
// A worker's stream has an idle deadline: any message renews its leases, and
// silence for kWorkerIdleTimeout ends the stream and requeues its tasks, as
// does the session ending (a lost worker or a revoked join link).
//
// Threading: one executor, like Provider. Must outlive the Provider using it.

#include "pool/calibration.hpp"
#include "pool/known_answers.hpp"
#include "pool/pool_store.hpp"
#include "pool/replication.hpp"
#include "pool/scheduler.hpp"
#include "pool/scheduling/scheduler.hpp"
#include "pool/stall_watch.hpp"
#include "pool/workload.hpp"
#include "provider/service_router.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <variant>
#include <vector>

namespace runsnack::pool {

inline constexpr const char* kServiceWorker = "pool-worker";
inline constexpr const char* kServiceClient = "pool-client";
// Workers send a message at least every few seconds (claim polls, heartbeats).
inline constexpr std::chrono::milliseconds kWorkerIdleTimeout{20000};
// Tasks one claim may lease, results one message may carry.
inline constexpr std::int64_t kMaxClaimBatch = 64;
// A job with pending tasks that no device leased from for this long goes to
// any device that may run them, whatever the learned scheduler would prefer.
inline constexpr std::chrono::milliseconds kStarvedAfter{2000};
// Pending tasks of a job the stall watch looks at (past these it assumes
// one of them can run: a false "stuck" would fail a job that could finish).
inline constexpr std::int64_t kStallScan = 256;
// Failed attempts a job's status lists (the oldest first).
inline constexpr std::int64_t kMaxFailuresShown = 20;

class Coordinator {
 public:
  Coordinator(boost::asio::any_io_executor ex, PoolStore& store, std::function<void(const nlohmann::json&)> on_event);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  void add_services(ServiceRouter& router);
  // Claims decided by the learned multi-objective scheduler
  // (pool/scheduling/) instead of fastest-free-device first (`pool serve`
  // does this unless given --scheduler fastest). Loads what it learned
  // before a restart from the store.
  void use_learned_scheduler();
  // What the learned scheduler believes of a device (nothing: no learned
  // scheduler, or nothing learned): per workload, its expected task seconds,
  // observations and success rate. Shown by `pool status`.
  nlohmann::json learned_estimates(const std::string& device) const;
  // Expires leases every 250 ms until stop().
  boost::asio::awaitable<void> run_maintenance();
  void stop();

  boost::asio::awaitable<void> serve_worker(std::shared_ptr<MuxStream> stream, ServiceContext context);
  boost::asio::awaitable<void> serve_client(std::shared_ptr<MuxStream> stream, ServiceContext context);

  // A worker on another transport than a "pool-worker" stream (a browser's
  // WebSocket, pool/browser/): the same requests and answers, no binary
  // frames. opened and closed bracket its life as a stream's do; the caller
  // enforces kWorkerIdleTimeout. Defined in coordinator_link.cpp.
  struct LinkedWorker {
    std::string device, public_key;
    std::chrono::steady_clock::time_point last_renewal{};
  };
  void linked_worker_opened(const ServiceContext& context);
  nlohmann::json linked_worker_request(const nlohmann::json& req, const ServiceContext& context, LinkedWorker& worker);
  void linked_worker_closed(const ServiceContext& context, const LinkedWorker& worker, const std::string& why);

 private:
  // The binary frames that came after a worker's message, taken by its
  // results in order (wire.hpp).
  struct Frames {
    std::vector<std::string> all;
    std::size_t next = 0;
  };
  nlohmann::json handle_worker(const nlohmann::json& req, const ServiceContext& ctx, std::string& device,
                               std::string& public_key, Frames& frames);
  nlohmann::json handle_client(const nlohmann::json& req, const ServiceContext& ctx);
  std::int64_t now_ms() const;
  // The job's result checker, made on first use and kept (nullptr: none).
  ResultChecker* checker_for(const std::string& job);
  nlohmann::json verification_method(const std::string& job);
  // Checks a result by computation when its workload can (else nothing); counts the cost.
  std::optional<Verdict> verify(const std::string& task, const TaskResult& result);
  // The job of `task` ended: drop what was kept for it.
  void forget_job(const std::string& task);
  // The workload's event for an accepted result (the render preview's tiles).
  void publish_progress(const std::string& task, const TaskResult& result);
  // A claim of an unproven device: a known-answer task, or nothing.
  std::optional<nlohmann::json> known_answer_claim(const std::string& device, const std::string& peer);
  // The answer to a known-answer task, judged against the known one.
  nlohmann::json known_answer_result(const KnownAnswers::Issued& issued, const std::string& task, const std::string& peer,
                                     const TaskResult& result, const ServiceContext& ctx, std::int64_t now);
  // A run that exited non-zero: a failed shard (PoolStore::shard_failed).
  nlohmann::json shard_failed(const std::string& task, std::int64_t attempt, const std::string& peer,
                              const std::string& device, const TaskResult& result, std::int64_t now);
  // A checked result of `device` (right or wrong): reputation, exclusion, audit.
  void record_check(const std::string& device, const std::string& task, const std::string& peer, bool valid,
                    const std::string& why, const ServiceContext& ctx, std::int64_t now);
  // The networks of the devices asking for work now, but `device`'s.
  std::vector<std::string> free_networks(const std::string& device) const;
  // Fails the jobs no online worker may serve any more (stall_watch.hpp).
  void give_up_stuck_jobs();
  // What follows a result's completion (progress, events) and the worker's answer.
  nlohmann::json completed(const std::string& task, const std::string& peer, const TaskResult& result,
                           const CompleteOutcome& outcome);

  boost::asio::any_io_executor ex_;
  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  double now_s() const;
  // The learned policy's answer for a claim: the job to claim from (and its
  // --prefer), or a reply telling the worker to wait.
  struct LearnedChoice {
    std::string job;
    scheduling::Preference preference = scheduling::Preference::balanced;
  };
  std::variant<LearnedChoice, nlohmann::json> learned_choice(const std::string& device, const std::string& peer);
  void learned_finished(const std::string& task, const std::string& device, scheduling::Outcome outcome);
  void save_learned();

  // A "results" batch's checked results, completed together (PoolStore::complete_many).
  struct DeferredResult {
    std::string task;
    std::int64_t attempt = 0;
    TaskResult result;
  };
  std::vector<DeferredResult>* deferred_ = nullptr;  // set while a batch is handled

  std::map<std::string, WaitingDevice> waiting_;
  std::map<std::string, std::chrono::system_clock::time_point> found_nothing_;  // device -> when its claim found nothing
  std::optional<scheduling::Scheduler> learned_;
  std::uint64_t ticks_ = 0;  // maintenance rounds
  std::int64_t workers_online_ = 0;  // open worker streams
  std::map<std::string, std::unique_ptr<ResultChecker>> checkers_;
  std::map<std::string, nlohmann::json> methods_;  // job -> its verification method (small)
  std::map<std::string, std::pair<const Workload*, nlohmann::json>> specs_;  // running jobs' workload and spec
  boost::asio::steady_timer maintenance_timer_;
  bool stopping_ = false;
  std::map<std::string, std::chrono::steady_clock::time_point> job_progress_;  // job -> its last lease (or first sight)
  std::map<std::string, std::string> networks_;  // device -> network of its worker's session
  std::set<std::string> proven_;                 // devices with a valid checked result on record
  // Devices registered on this coordinator whose calibration answer is still due.
  struct PendingCalibration {
    CalibrationChallenge challenge;
    double hint = 0, price = 0;
    std::chrono::steady_clock::time_point issued;
  };
  std::map<std::string, PendingCalibration> calibrations_;
  std::mt19937_64 challenge_rng_{std::random_device{}()};
  std::set<std::string> grants_without_credits_;  // link grants seen that carry no (more) credits
  StallWatch stalls_;
  KnownAnswers known_answers_;                   // hidden known-answer tasks for unproven devices
  Replication replication_;  // exec --replicas / --spot-check (after on_event_, which it copies)
};

}  // namespace runsnack::pool
