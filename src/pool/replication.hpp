#pragma once
// Verification by replication for results no computation can check (exec):
// `--replicas R` runs every shard on R different peers, `--spot-check F`
// re-runs a share of results on another peer, at least F and all of an
// unproven device's (scheduling::TrustPolicy). A result that needs copies is
// held (its lease stays live, nothing is paid) until a quorum of copies
// agree bit for bit: the agreeing ones are completed and paid, a differing
// one is a failed check for its device (reputation, exclusion, never paid)
// and its task runs again elsewhere; with no majority, one more copy runs.
//
// Copies are task rows past the job's shards (PoolStore::add_copy) that run
// the original shard; replicas never run on the peer of another copy of the
// same shard, and prefer a device on a network none of the shard's other
// copies ran on (scheduling/network.hpp): a device on a network already used
// leaves a copy while a device elsewhere is free, and takes it otherwise; the
// job's verification reports the fewest networks any decided quorum ran on.
// A decided shard's value becomes a known answer (known_answers.hpp) for
// testing new devices. Held results live in the coordinator's memory: after a
// coordinator restart their tasks run again (leases expire), nothing is lost.
// Not thread-safe: call from the coordinator's executor.

#include "pool/known_answers.hpp"
#include "pool/pool_store.hpp"
#include "pool/scheduling/rng.hpp"
#include "pool/scheduling/trust_policy.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace runsnack::pool {

class Replication {
 public:
  using Audit = std::function<void(const std::string& what, const std::string& why, const nlohmann::json& detail)>;
  Replication(PoolStore& store, std::function<void(const nlohmann::json&)> on_event, std::uint64_t seed,
              KnownAnswers& known);

  // The network a worker's peer connects from (scheduling::network_of).
  void worker_network(const std::string& peer, const std::string& network);

  // A leased task as the worker must see it: a copy runs its original shard;
  // its sibling copies and the original then avoid this peer. False: leave
  // this copy for one of the devices free now (`free_networks`: their
  // networks) on a network the shard's copies do not use yet; the caller
  // gives the lease back.
  Result<bool> on_claimed(LeasedTask& task, const std::string& peer, std::int64_t now_ms,
                          const std::vector<std::string>& free_networks);

  // A signed, well-formed result of a job's task. Nothing when the job does
  // not replicate or this result needs no copy (the caller completes it as
  // usual); otherwise the answer for the worker, the result held or decided.
  std::optional<nlohmann::json> on_result(const std::string& task, std::int64_t attempt, const std::string& peer,
                                          const std::string& device, const TaskResult& result, std::int64_t now_ms,
                                          const Audit& audit);

  // The tasks whose results are held for a quorum of the job's (their
  // leases stay live, but nothing of them runs any more).
  std::set<std::string> held_tasks(const std::string& job) const;
  // The job ended otherwise (given up): its quorums are void.
  void forget_job(const std::string& job);

  // Extra runs made for a job's quorums so far (copies and tie breaks).
  std::int64_t copies(const std::string& job);
  // The fewest different networks the copies of any of the job's decided
  // quorums ran on (below the copies' number: not network-diverse), or
  // nothing before a quorum was decided (or after a coordinator restart).
  std::optional<std::int64_t> networks(const std::string& job) const;

  // A result of `device` checked otherwise (Freivalds, a known answer):
  // counts in its trust run like a quorum's verdict.
  void record_check(const std::string& device, bool valid);

 private:
  struct Held {
    std::string task, peer, device;
    std::int64_t attempt = 0;
    TaskResult result;
  };
  struct Group {
    int needed = 0;                     // results to hold before deciding
    std::vector<Held> held;
    std::optional<TaskResult> decided;  // the value a majority agreed on
    std::map<std::string, std::string> claimed;  // copy task -> peer that holds its lease
  };
  struct JobRule {
    int replicas = 1;
    double spot_check = 0;
    std::int64_t shards = 0;
  };

  std::optional<JobRule> rule(const std::string& job);
  std::string network(const std::string& peer) const;
  // A quorum was decided: its networks counted, its value made a known answer.
  void quorum_decided(const std::string& job, std::int64_t shard, const Group& g, std::int64_t shards);
  // Completes and pays an agreeing copy, or fails a differing one (a failed check).
  nlohmann::json finish(const std::string& job, const Held& h, bool agrees, std::int64_t now_ms, const Audit& audit);

  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  scheduling::TrustPolicy trust_;
  scheduling::Rng rng_;  // spot-check draws
  std::map<std::string, std::optional<JobRule>> rules_;
  std::map<std::string, std::map<std::int64_t, Group>> groups_;  // job -> original shard -> copies
  KnownAnswers& known_;
  std::map<std::string, std::string> networks_;       // peer -> network
  std::map<std::string, std::int64_t> job_networks_;  // job -> fewest networks of a decided quorum
};

// Bit for bit: exit code, stdout and files.
bool same_result(const TaskResult& a, const TaskResult& b);

}  // namespace runsnack::pool
