#pragma once
// The pool's multi-objective scheduler (docs/ARCHITECTURE.md section 7): a pure,
// stateful decision machine. The coordinator feeds it events (devices
// joining and leaving, copies of tasks starting and ending, verdicts on
// results) with the current time, and asks it what an idle device should do
// when that device claims work. It does no I/O and reads no clock.
//
// Decision for an idle device D (docs/SCHEDULER.md has the reasoning):
//  1. For each job with pending tasks D may run, estimate D's time to a
//     counted result (a Thompson draw from its learned speed, plus a replica
//     when its results still need one), its price and its reliability
//     (learned success rate x the chance it stays online that long), and from
//     them D's score under the job's preference. D is needed for the job
//     unless the devices that beat it on that score (counted in CapacityGrid,
//     busy ones from when they will be free) can finish all pending work of
//     all jobs, in units of this job's tasks, within D's own task time (x 1.5
//     for balanced, x 3 for cheap).
//  2. Of the jobs D is needed for, it runs the one where its comparative
//     advantage (its speed there over the pool's mean) and the tasks' size at
//     their learned 98th percentile are largest, among those it would finish
//     well before the pool is through the pending work; so long tasks start
//     early on devices good at them and short ones fill the end.
//  3. For jobs with nothing pending, D starts a backup copy of the straggler
//     it gains most on, if it would finish a copy sooner by a margin (x 1.2
//     fast, x 1.5 balanced, x 2.5 cheap), at most max_copies copies per task,
//     never two on one peer, and only when the devices better than D could
//     not make all such copies sooner themselves. A straggler that would end
//     after the pool is through the pending work comes before pending work.
//  4. Otherwise D waits and asks again after retry_after_s.
//
// Learned state (Estimator), the devices, the running copies and the random
// generator are saved by save() and restored exactly by load(): the same
// calls after a load give the same decisions. After a coordinator restart,
// call forget_sessions() on the loaded scheduler and replay device_joined
// as workers reconnect.
//
// Cost: decide() is O(jobs x non-empty grid cells + busy devices walked) and
// stops counting once the answer is known; events are O(workloads x log n).
// Unknown devices or tasks in events are ignored (the store is the source of
// truth). Not thread-safe: call it from the coordinator's executor.

#include "core/error.hpp"
#include "pool/scheduling/capacity_grid.hpp"
#include "pool/scheduling/estimator.hpp"
#include "pool/scheduling/rng.hpp"
#include "pool/scheduling/running_tasks.hpp"
#include "pool/scheduling/types.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace runsnack::pool::scheduling {

struct SchedulerConfig {
  EstimatorConfig estimates;
  double need_margin = 0.05;        // better devices must cover demand x (1 + margin) + need_extra
  double need_extra = 0.5;          //   tasks (reliability-weighted) before D waits
  double better_by = 0.1;           // a device beats D only when its score is this much lower:
                                    //   equals are not "better", so equals do not all wait
  double horizon_fast = 1.0;        // x D's task time: how long better devices may take instead
  double horizon_balanced = 1.5;
  double horizon_cheap = 3.0;
  double fit_share = 0.75;          // a needed device prefers tasks it ends within this share of the
                                    //   time the pool needs for the pending work ...
  double tail_z = 2.0;              //   counting a task as long as its workload's 98th percentile
  double advantage_power = 2.0;     // weight of comparative advantage (D's speed in a workload over
                                    //   the pool's mean there) against task size when choosing a job
  double backup_gain_fast = 1.2;    // a backup only when the straggler's expected end is later than
  double backup_gain_balanced = 1.5;  //   now + D's time x this
  double backup_gain_cheap = 2.5;
  int max_copies = 2;               // copies of one task running at once (1 original + backups)
  std::size_t straggler_candidates = 8;  // per job and ordering, looked at for a backup
  double overdue_factor = 0.5;      // an overdue task needs this share of its elapsed time again
  double retry_share = 0.1;         // wait: ask again after this share of D's task time,
  double min_retry_s = 1;           //   within these bounds
  double max_retry_s = 30;
  // Workloads whose results the coordinator checks by computation when they
  // arrive (render: pixel spot checks, matmul: Freivalds): they never wait
  // for a replica, so set_verification() does not slow their tasks down.
  std::vector<std::string> checked_by_computation = {"render", "matmul"};
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config = {}, std::uint64_t seed = 1);

  // A device registered or came back (its learned state is kept by id).
  void device_joined(const DeviceProfile& device, double now_s);
  // It went away; its running copies are lost.
  void device_left(const std::string& device, double now_s);
  // A copy of a task was leased to a device (a backup: the same task id again).
  void task_started(const TaskStart& start, double now_s);
  // A copy ended. The first `ok` marks the task done; later copies still
  // free their devices when they end (ok or cancelled).
  void task_finished(const TaskEnd& end, double now_s);
  // A result the device returned was later judged (replica quorum, spot check).
  void verdict(const std::string& device, bool valid);
  // The probability that its next result needs a replica before it counts
  // (TrustPolicy::replica_probability): an unproven device's task ends later.
  void set_verification(const std::string& device, double probability);  // exec-like workloads only (see config)
  // After a restart: nobody online and nothing running; learned state kept.
  void forget_sessions(double now_s);

  // What idle `device` should do now. `jobs`: the jobs with tasks pending
  // that this device may run, in the order the store would serve them.
  Decision decide(const std::string& device, std::span<const PendingJob> jobs, double now_s);

  struct Estimate {
    double task_s = 0;         // expected seconds for a task of `work`
    double speed_sd = 0;       // log-scale uncertainty of the speed
    std::uint32_t observations = 0;
    std::uint64_t workload_observations = 0;  // of the workload on any device (0: a_w is still its prior)
    double success = 0;        // expected success rate
    double departure_rate = 0; // per online second
  };
  std::optional<Estimate> estimate(const std::string& device, const std::string& workload, double work) const;
  // The non-dominated (time, cost, reliability) cells for a task of `job`.
  std::vector<FrontPoint> pareto_front(const PendingJob& job) const;
  std::size_t online_devices() const { return online_; }
  std::size_t running_tasks() const { return running_.size(); }

  nlohmann::json save() const;
  static Result<Scheduler> load(const nlohmann::json& state, SchedulerConfig config = {});

 private:
  struct Device {
    DeviceProfile profile;
    bool online = false;
    double since = 0;
    double verification = 0;           // set_verification
    std::vector<std::string> running;  // tasks it runs a copy of
    // What each grid holds for it (saved as is, so a loaded grid is identical).
    std::vector<CapacityGrid::Member> placed;
  };
  std::optional<std::uint32_t> find(const std::string& id) const;
  std::uint32_t workload(const std::string& name, double typical_work);
  CapacityGrid::Member member(std::uint32_t d, std::uint32_t w) const;
  void mark_checked();  // checked_ from the config, for every workload known
  // D's replica probability where workload w's results wait for one, else 0.
  double verification(std::uint32_t d, std::uint32_t w) const;
  double profile_log_score(std::uint32_t d) const;
  void place(std::uint32_t d, std::uint32_t w, const CapacityGrid::Member& m);
  void refresh(std::uint32_t d);  // re-place d in every grid after learning
  void mark_busy(std::uint32_t d);
  void end_copy(std::uint32_t d, const std::string& task, Outcome outcome, double elapsed_s, double now_s);
  double horizon(Preference p) const;
  double backup_gain(Preference p) const;
  // The best backup copy for d, if a straggler would end after `pending_end`.
  std::optional<Decision> backup(std::uint32_t d, std::span<const PendingJob> jobs, double now_s, double pending_end);

  SchedulerConfig config_;
  Rng rng_;
  Estimator est_;
  std::vector<Device> devices_;
  std::unordered_map<std::string, std::uint32_t> index_;
  std::vector<CapacityGrid> grids_;  // by workload
  std::vector<bool> checked_;        // by workload: in config_.checked_by_computation
  RunningTasks running_;
  std::vector<RunningTasks::Candidate> candidates_;  // scratch for backup()
  std::vector<double> per_work_, replica_per_work_;  // scratch for backup()
  std::size_t online_ = 0;
};

}  // namespace runsnack::pool::scheduling
