#pragma once
// Verification by replication for results no computation can check (exec):
// `--replicas R` runs every shard on R different peers, `--spot-check F`
// re-runs a share of results on another peer, at least F and all of an
// unproven device's (scheduling::TrustPolicy). A result that needs copies is
// held (its lease stays live, nothing is paid) until its quorum is decided.
//
// A quorum counts independent parties only: copies on different PeerIds
// and different networks (scheduling/network.hpp); copies from one network
// count once, whatever their keys. A value is verified when the networks
// agreeing on it are a majority of the copies asked for (at least two) and
// more than any other value has, and one of the parties agreeing is vouched
// for: a peer the operator trusts (`pool trust`) or a device with
// kProvenChecks valid checks on record. New identities are free and networks
// can be rented: two of them never verify each other. Without such a party
// one more copy runs on a vouched-for device while one is online (else the
// shard is delivered unverified). Then the agreeing copies are completed and
// paid and count as valid checks; a differing one is a failed check for its
// device (reputation, exclusion, never paid) and its task runs again
// elsewhere. When all copies asked for are in without that, one more copy
// runs, for a device on a network none of them used, while such a device is
// online (at most kMaxExtraCopies); when none is, that copy waits
// PoolPolicy::independent_wait_ms for one (a worker may be on its way: a
// moment's absence must not cost the verdict), then the shard is delivered
// unverified: the value most peers agree on is kept, nobody's record moves,
// the job counts it in "unverified" and never reports it verified.
//
// Copies are task rows past the job's shards (PoolStore::add_copy) that run
// the original shard; replicas never run on the peer of another copy of the
// same shard, and prefer a device on a network none of the shard's other
// copies ran on. A shard decided by independent parties who all had a proven
// record becomes a known answer (known_answers.hpp). Held results live in the
// coordinator's memory: after a coordinator restart their tasks run again
// (leases expire), nothing is lost. A decided non-zero exit fails the shard
// (PoolStore::shard_failed). Not thread-safe: call from the coordinator's executor.

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

// Bit for bit: exit code, stdout and files.
bool same_result(const TaskResult& a, const TaskResult& b);

// Copies made past those asked for, per shard: tie breaks and copies for an independent network.
inline constexpr int kMaxExtraCopies = 3;
// Valid checks a device needs on record before its results may become known answers.
inline constexpr std::int64_t kProvenChecks = 3;

class Replication {
 public:
  using Audit = std::function<void(const std::string& what, const std::string& why, const nlohmann::json& detail)>;
  Replication(PoolStore& store, std::function<void(const nlohmann::json&)> on_event, std::uint64_t seed,
              KnownAnswers& known);

  // A worker's peer is online from `network` (scheduling::network_of) / went away or was excluded.
  void worker_network(const std::string& peer, const std::string& network);
  void worker_left(const std::string& peer);
  std::string network(const std::string& peer) const;

  // Whether the job's results go through quorums (exec --replicas / --spot-check).
  bool replicates(const std::string& job);

  // A leased task as the worker must see it: a copy runs its original shard;
  // its sibling copies and the original then avoid this peer. False: leave
  // this copy for one of the devices free now (`free_networks`: their
  // networks) on a network the shard's copies do not use yet, or it is a
  // copy only such a device may take; the caller gives the lease back.
  Result<bool> on_claimed(LeasedTask& task, const std::string& peer, std::int64_t now_ms,
                          const std::vector<std::string>& free_networks);

  // A signed, well-formed result of a job's task. Nothing when the job does
  // not replicate or this result needs no copy (the caller completes it as
  // usual); otherwise the answer for the worker, the result held or decided.
  std::optional<nlohmann::json> on_result(const std::string& task, std::int64_t attempt, const std::string& peer,
                                          const std::string& device, const TaskResult& result, std::int64_t now_ms,
                                          const Audit& audit);

  // Shards whose extra copy no online device may take, for
  // PoolPolicy::independent_wait_ms, are delivered unverified (the maintenance tick).
  void tick(std::int64_t now_ms, const Audit& audit);

  // The tasks whose results are held for a quorum of the job's (their
  // leases stay live, but nothing of them runs any more).
  std::set<std::string> held_tasks(const std::string& job) const;
  // How many results of `peer` are held: finished work, whose leases stay
  // live only until the quorum decides (they take none of its lease room).
  std::int64_t held_results(const std::string& peer) const;
  // ... of all peers on `network`.
  std::int64_t held_results_on_network(const std::string& network) const;
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
    std::int64_t arrived_ms = 0;  // paid up to here, not for the wait for its quorum
  };
  using Agreement = std::function<bool(const TaskResult&, const TaskResult&)>;
  struct Group {
    Agreement same;                     // whether two results agree (the job's rule)
    bool exact = true;                  // ... bit for bit: a decided value may become a known answer
    int needed = 0;                     // results to hold before deciding
    std::vector<Held> held;
    std::optional<TaskResult> decided;  // the value kept
    bool verified = false;              // decided by independent parties
    std::map<std::string, std::string> claimed;  // copy task -> peer that holds its lease
    int extra = 0;                      // copies added past those asked for
    std::string extra_copy;             // the last one, while nobody has returned it
    bool extra_needs_network = false;   // it is only for a device on a network no copy used
    bool extra_needs_vouched = false;   // ... or only for a vouched-for peer
    std::int64_t untaken_since = 0;     // when no online device could take extra_copy (0: one could)
  };
  struct JobRule {
    int replicas = 1;
    double spot_check = 0;
    std::int64_t shards = 0;
    Agreement same = same_result;  // the workload's (train-round: within a tolerance)
    bool exact = true;
  };
  // One value among the held results: who agrees on it.
  struct Tally {
    std::size_t first = 0;  // index of its first holder in Group::held
    std::set<std::string> peers, networks;
  };

  std::optional<JobRule> rule(const std::string& job);
  std::vector<Tally> tally(const Group& g) const;
  std::set<std::string> used_networks(const Group& g, const std::string& except_copy = "") const;
  // An online peer none of the shard's copies used, on a network none used.
  bool independent_device_online(const Group& g) const;
  // The next step for a group with all its copies in and no independent majority.
  std::optional<nlohmann::json> extend_or_settle(const std::string& job, std::int64_t shard, Group& g,
                                                 const std::string& task, std::int64_t attempt, std::int64_t now_ms,
                                                 const Audit& audit);
  // Who an extra copy is for: any peer the shard's copies did not use, one on
  // a network they did not use, or a vouched-for peer.
  enum class CopyFor { another_peer, another_network, a_vouched_peer };
  // One more copy of the shard, for a peer not in `avoid` (and as `who`
  // says); nothing, or the refusal when the store failed.
  std::optional<nlohmann::json> add_extra_copy(const std::string& job, std::int64_t shard, Group& g,
                                               std::vector<std::string> avoid, CopyFor who, std::int64_t now_ms);
  // Whether a party agreeing on `t`'s value is vouched for.
  Result<bool> vouched(const Tally& t) const;
  // Online vouched-for peers none of the shard's copies used.
  Result<std::set<std::string>> vouched_takers(const Group& g) const;
  // Decides the group on held[winner]'s value; the answer for (task, attempt).
  nlohmann::json decide(const std::string& job, std::int64_t shard, Group& g, std::size_t winner, bool verified,
                        const std::string& task, std::int64_t attempt, std::int64_t now_ms, const Audit& audit);
  // A quorum was decided: its networks counted, its value maybe a known answer.
  void quorum_decided(const std::string& job, std::int64_t shard, const Group& g, std::int64_t shards);
  // Held results of a group that cannot be verified: the value a vouched-for
  // party holds, else the one most peers agree on (the earliest on a tie).
  std::size_t settle_by_peers(const Group& g) const;
  // Completes and pays an agreeing copy, or turns a differing one away (a
  // failed check when the quorum is verified).
  nlohmann::json finish(const std::string& job, const Held& h, bool agrees, bool verified, std::int64_t now_ms,
                        const Audit& audit);

  PoolStore& store_;
  std::function<void(const nlohmann::json&)> on_event_;
  scheduling::TrustPolicy trust_;
  scheduling::Rng rng_;  // spot-check draws
  std::map<std::string, std::optional<JobRule>> rules_;
  std::map<std::string, std::map<std::int64_t, Group>> groups_;  // job -> original shard -> copies
  KnownAnswers& known_;
  std::map<std::string, std::string> networks_;       // peer -> network (last seen)
  std::map<std::string, std::string> online_;         // peer -> network, workers online now
  std::map<std::string, std::int64_t> job_networks_;  // job -> fewest networks of a decided quorum
};

}  // namespace runsnack::pool
