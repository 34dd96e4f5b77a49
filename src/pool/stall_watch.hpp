#pragma once
// Jobs that can no longer complete end `failed` with a reason instead of
// waiting forever. A job is stuck when it has pending tasks, none of its
// tasks runs (a lease whose result is only held for a quorum does not count)
// and no online worker may take any of its pending tasks: each one ran a
// copy of the shard, had its result refused there, or is excluded (a quorum
// that needs more independent workers than the pool has, a shard every
// worker was refused for). Workers may join meanwhile, so a job is given up
// only after it stayed stuck for `give_up_after`; with no worker online at
// all it is waiting, not stuck. No I/O: the coordinator feeds it the store's
// view once a second and fails what it returns.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace runsnack::pool {

class StallWatch {
 public:
  explicit StallWatch(std::chrono::milliseconds give_up_after) : give_up_after_(give_up_after) {}

  struct JobView {
    std::string job;
    std::int64_t pending = 0;     // tasks waiting for a worker
    std::int64_t running = 0;     // leased tasks whose result has not come yet
    std::int64_t placeable = 0;   // pending tasks some online, non-excluded worker may take
    std::int64_t workers = 0;     // online, non-excluded workers
  };
  static bool stuck(const JobView& v) { return v.pending > 0 && v.running == 0 && v.placeable == 0 && v.workers > 0; }

  // The running jobs now (any job not listed is forgotten): the ones stuck
  // for at least give_up_after, to be failed.
  std::vector<std::string> step(const std::vector<JobView>& jobs, std::int64_t now_ms);

  std::chrono::milliseconds give_up_after() const { return give_up_after_; }

 private:
  std::chrono::milliseconds give_up_after_;
  std::map<std::string, std::int64_t> stuck_since_;  // job -> when it was first seen stuck
};

}  // namespace runsnack::pool
