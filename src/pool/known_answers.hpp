#pragma once
// Hidden known-answer tasks for unproven devices (docs/SCHEDULER.md
// "Verification"). The coordinator keeps results it has verified (an exec
// shard a quorum of independent copies agreed on); a claim of a device with
// no valid checked result on record gets one of them again instead of new
// work: the same task id, job, shard and spec, with the next attempt number,
// so on the wire it is a retry of a real task like any other. Its answer is
// compared bit for bit with the known one: wrong is a failed check like a
// lost quorum, right is a valid one. Nothing reaches the job: the result is
// neither stored, merged nor paid (the task was paid once, to the peer whose
// result the job kept; docs say why).
//
// One known-answer task per device at a time; a device whose one is out gets
// no other work until it answers. Never given to a peer that ran a copy of
// that shard (it could replay its own answer). Kept in memory: after a
// coordinator restart the pool learns new answers from new quorums.
// Not thread-safe: call from the coordinator's executor.

#include "pool/pool_store.hpp"
#include "pool/scheduling/rng.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runsnack::pool {

class KnownAnswers {
 public:
  explicit KnownAnswers(std::uint64_t seed, std::size_t keep = 64);

  // A verified result: `task` as a worker would get it again (its shard is
  // the one the answer is for), and the peers that ran a copy of it.
  void learn(const LeasedTask& task, const TaskResult& answer, std::vector<std::string> peers);

  // A known-answer task for this claim of `device` (of `peer`), or nothing
  // when none is known that this peer did not run. The caller decides that
  // the device is unproven.
  std::optional<LeasedTask> issue(const std::string& device, const std::string& peer);
  // Whether `device` has one out (it gets no other work until it answers).
  bool outstanding(const std::string& device) const;

  // A result or failure of `peer` for (task, attempt): the known-answer task
  // it answers, which is then no longer out, or nothing (a real task).
  struct Issued {
    std::string device;
    std::string job;
    TaskResult answer;
  };
  std::optional<Issued> take(const std::string& peer, const std::string& task, std::int64_t attempt);
  // The worker went away (or re-registered without it): its tasks are void.
  void forget_peer(const std::string& peer);

  std::size_t known() const { return known_.size(); }
  std::int64_t issued_total() const { return issued_total_; }

 private:
  struct Known {
    LeasedTask task;
    TaskResult answer;
    std::vector<std::string> peers;
    std::vector<std::string> given_to;  // devices that got it
  };
  struct Key {
    std::string peer, task;
    std::int64_t attempt = 0;
    auto operator<=>(const Key&) const = default;
  };

  std::size_t keep_;
  scheduling::Rng rng_;
  std::deque<Known> known_;      // newest last, at most keep_
  std::map<Key, Issued> out_;
  std::map<std::string, Key> out_by_device_;
  std::int64_t issued_total_ = 0;
};

}  // namespace runsnack::pool
