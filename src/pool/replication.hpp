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
// same shard. Held results live in the coordinator's memory: after a
// coordinator restart their tasks run again (leases expire), nothing is lost.
// Not thread-safe: call from the coordinator's executor.

#include "pool/pool_store.hpp"
#include "pool/scheduling/rng.hpp"
#include "pool/scheduling/trust_policy.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::pool {

class Replication {
 public:
  using Audit = std::function<void(const std::string& what, const std::string& why, const nlohmann::json& detail)>;
  Replication(PoolStore& store, std::function<void(const nlohmann::json&)> on_event, std::uint64_t seed);

  // A leased task as the worker must see it: a copy runs its original shard;
  // its sibling copies and the original then avoid this peer.
  Result<void> on_claimed(LeasedTask& task, const std::string& peer, std::int64_t now_ms);

  // A signed, well-formed result of a job's task. Nothing when the job does
  // not replicate or this result needs no copy (the caller completes it as
  // usual); otherwise the answer for the worker, the result held or decided.
  std::optional<nlohmann::json> on_result(const std::string& task, std::int64_t attempt, const std::string& peer,
                                          const std::string& device, const TaskResult& result, std::int64_t now_ms,
                                          const Audit& audit);

  // Extra runs made for a job's quorums so far (copies and tie breaks).
  std::int64_t copies(const std::string& job);

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
  };
  struct JobRule {
    int replicas = 1;
    double spot_check = 0;
    std::int64_t shards = 0;
  };

  std::optional<JobRule> rule(const std::string& job);
  // Completes and pays an agreeing copy, or fails a differing one (a failed check).
  nlohmann::json finish(const std::string& job, const Held& h, bool agrees, std::int64_t now_ms, const Audit& audit);

  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  scheduling::TrustPolicy trust_;
  scheduling::Rng rng_;  // spot-check draws
  std::map<std::string, std::optional<JobRule>> rules_;
  std::map<std::string, std::map<std::int64_t, Group>> groups_;  // job -> original shard -> copies
};

// Bit for bit: exit code, stdout and files.
bool same_result(const TaskResult& a, const TaskResult& b);

}  // namespace runsnack::pool
