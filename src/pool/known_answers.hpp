#pragma once
// Hidden known-answer tasks for unproven devices (docs/SCHEDULER.md
// "Verification"). The coordinator keeps results a quorum of independent
// parties decided, when every one of them had a proven record (Replication
// decides that): a Sybil pair cannot plant one. A claim of a device with no
// valid checked result on record gets one of them again instead of new work:
// the same task id, job, shard and spec, with the next attempt number, so on
// the wire it is a retry of a real task like any other. Nothing reaches the
// job: the result is neither stored, merged nor paid.
//
// A right answer proves the device. A wrong one is not yet a verdict: the
// known answer itself could be wrong. It is disputed, and the same task goes
// as a tie break to a proven device independent of both sides (another peer
// and another network than the answer's producers and the disputer). If the
// tie break agrees with the known answer, the disputer was wrong (a failed
// check, towards exclusion); if it agrees with the disputer, the known answer
// was wrong: it is dropped and its producers' results were wrong; if with
// neither, the answer is dropped without a verdict. A known answer is never
// issued again to a device that disputed it.
//
// One hidden task per device at a time; a device with one out gets no other
// work until it answers. Never given to a peer that ran a copy of that shard
// (it could replay its own answer). Kept in memory: after a coordinator
// restart the pool learns new answers from new quorums.
// Not thread-safe: call from the coordinator's executor.

#include "pool/pool_store.hpp"
#include "pool/scheduling/rng.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::pool {

// Disputes a known answer may collect before it is dropped unjudged (each holds a result in memory).
inline constexpr std::size_t kMaxDisputes = 8;

class KnownAnswers {
 public:
  explicit KnownAnswers(std::uint64_t seed, std::size_t keep = 64);

  // Where a result came from.
  struct Party {
    std::string peer, device, network;
  };

  // A verified result: `task` as a worker would get it again (its shard is
  // the one the answer is for), and the parties that produced it.
  void learn(const LeasedTask& task, const TaskResult& answer, std::vector<Party> producers);

  // A known-answer task for this claim of an unproven `device` (of `peer`),
  // or nothing when none is known that this peer did not run and this
  // device did not dispute. The caller decides that the device is unproven.
  // `may_run`: whether the device can run a task (DeviceRuns::allows its needs); empty: any.
  using MayRun = std::function<bool(const LeasedTask&)>;
  std::optional<LeasedTask> issue(const std::string& device, const std::string& peer, const MayRun& may_run = {});
  // A tie break for a proven `device`: a disputed answer none of whose
  // parties shares its peer or network, or nothing.
  std::optional<LeasedTask> issue_tiebreak(const std::string& device, const std::string& peer, const std::string& network,
                                           const MayRun& may_run = {});
  // Whether `device` has one out (it gets no other work until it answers).
  bool outstanding(const std::string& device) const;

  // A result or failure of `peer` for (task, attempt): the hidden task it
  // answers, which is then no longer out, or nothing (a real task).
  struct Issued {
    std::string device;
    std::string job;
    TaskResult answer;
    bool tiebreak = false;
  };
  std::optional<Issued> take(const std::string& peer, const std::string& task, std::int64_t attempt);

  // A tested device answered `result`, which is not the known answer: held
  // for a tie break (the answer is dropped, unjudged, at kMaxDisputes).
  void dispute(const std::string& task, const Party& disputer, const TaskResult& result);
  // What a tie break's `result` decided.
  struct Resolution {
    std::vector<Party> wrong;  // parties whose result it contradicts (disputers, or the answer's producers)
    std::vector<Party> right;  // disputers it proves right
    bool tiebreak_valid = false;  // it agreed with one side (else: no verdict on anyone)
    bool answer_dropped = false;
  };
  Resolution resolve(const std::string& task, const TaskResult& result);

  // The worker went away (or re-registered without it): its tasks are void.
  void forget_peer(const std::string& peer);

  std::size_t known() const { return known_.size(); }
  std::int64_t issued_total() const { return issued_total_; }
  std::size_t open_disputes() const;

 private:
  struct Known {
    LeasedTask task;
    TaskResult answer;
    std::vector<Party> producers;
    std::vector<std::string> given_to;  // devices that got it (attempt numbers)
    std::vector<std::pair<Party, TaskResult>> disputes;
    bool tiebreak_out = false;
  };
  struct Key {
    std::string peer, task;
    std::int64_t attempt = 0;
    auto operator<=>(const Key&) const = default;
  };

  Known* find(const std::string& task);
  LeasedTask hand_out(Known& k, const std::string& device, const std::string& peer, bool tiebreak);

  std::size_t keep_;
  scheduling::Rng rng_;
  std::deque<Known> known_;      // newest last, at most keep_
  std::map<Key, Issued> out_;
  std::map<std::string, Key> out_by_device_;
  std::int64_t issued_total_ = 0;
};

}  // namespace runsnack::pool
