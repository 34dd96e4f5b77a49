#pragma once
// Which offload job runs next (offload.hpp), without threads: jobs carry an owner (on a provider,
// the consumer's PeerId); at most `per_owner` jobs of one owner run at once and its others wait in
// its own queue; owners with a job that may start are served in turn, one job per turn. The
// empty owner (the process's own work) is not limited per owner. So one consumer's long jobs
// hold at most `per_owner` threads, and another consumer's job starts on the next free one
// however many jobs the first has queued.
//
// Not thread-safe: the pool calls it under its lock.

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace runsnack::fs {

class OffloadJob {
 public:
  virtual ~OffloadJob() = default;
  virtual void run() = 0;
};

class OffloadQueue {
 public:
  explicit OffloadQueue(std::size_t per_owner) : per_owner_(per_owner) {}

  void push(const std::string& owner, std::unique_ptr<OffloadJob> job);
  // The next job that may start, and its owner (to hand to done() when it ends); none when every
  // waiting job's owner is at its limit, or nothing waits.
  struct Next {
    std::string owner;
    std::unique_ptr<OffloadJob> job;
  };
  std::optional<Next> next();
  void done(const std::string& owner);

  bool ready() const { return !turns_.empty(); }  // next() has a job
  std::size_t waiting() const { return waiting_; }
  std::size_t running() const { return running_; }
  std::size_t running(const std::string& owner) const;

 private:
  struct Lane {
    std::deque<std::unique_ptr<OffloadJob>> jobs;
    std::size_t running = 0;
    bool in_turn = false;  // in turns_
  };
  bool may_start(const std::string& owner, const Lane& lane) const {
    return !lane.jobs.empty() && (owner.empty() || lane.running < per_owner_);
  }
  void maybe_queue_turn(const std::string& owner, Lane& lane);

  std::size_t per_owner_;
  std::map<std::string, Lane> lanes_;  // owners with jobs waiting or running
  std::deque<std::string> turns_;      // owners that may start a job, in order
  std::size_t waiting_ = 0, running_ = 0;
};

}  // namespace runsnack::fs
