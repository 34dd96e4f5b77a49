#pragma once
// The policies poolsim compares ours with. All see the same events and get
// the same verification (the simulator runs it); none learns per device.
//
//  - round-robin: the classic static deal. Each task is dealt to the next
//    online device in turn; a device works through what it was dealt; a
//    leaver's share is dealt again. No backups.
//  - random: the same, each task to a uniformly random online device.
//  - fcfs: a plain shared queue; whoever asks first gets the next task.
//  - fastest-first+backups: the strong baseline from the volunteer-computing
//    literature. Of the idle devices, the `pending` fastest by calibration
//    benchmark get work (part 1's policy, pool/scheduler.hpp); once a job has
//    nothing pending, an idle device starts a backup copy of the running task
//    with the latest expected end, estimated from benchmark scores and a
//    pool-wide work-per-score rate learned per workload, or of an overdue
//    one, when it would finish a copy at least 1.2x sooner; at most 2 copies,
//    never on the same peer. Jobs are served in submission order.
//  - fastest-first: the same without backups (part 1's policy as it is).
//
// Verification-only entries (job ids ending in "#verify": replicas, tie
// breaks, audits) are served to whoever asks by every static policy.

#include "policy.hpp"
#include "pool/scheduling/running_tasks.hpp"

#include <cstdint>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

namespace poolsim {

class StaticDeal final : public Policy {
 public:
  StaticDeal(bool random, std::uint64_t seed) : random_(random), rng_(seed) {}
  std::string name() const override { return random_ ? "random" : "round-robin"; }
  void device_joined(const sch::DeviceProfile& d, double now) override;
  void device_left(const std::string& d, double now) override;
  void task_started(const sch::TaskStart&, double) override {}
  void task_finished(const sch::TaskEnd&, double) override {}
  sch::Decision decide(const std::string& d, std::span<const sch::PendingJob> jobs, double now) override;

 private:
  void deal(const std::string& job, std::int64_t n);
  bool random_;
  std::mt19937_64 rng_;
  std::vector<std::string> online_;                       // in join order
  std::unordered_map<std::string, std::size_t> position_;  // in online_
  std::size_t next_ = 0;
  std::unordered_map<std::string, std::map<std::string, std::int64_t>> dealt_;  // device -> job -> tasks
  std::map<std::string, std::int64_t> outstanding_;                             // job -> dealt, not started
};

class Fcfs final : public Policy {
 public:
  std::string name() const override { return "fcfs"; }
  void device_joined(const sch::DeviceProfile&, double) override {}
  void device_left(const std::string&, double) override {}
  void task_started(const sch::TaskStart&, double) override {}
  void task_finished(const sch::TaskEnd&, double) override {}
  sch::Decision decide(const std::string& d, std::span<const sch::PendingJob> jobs, double now) override;
};

class FastestFirstBackups final : public Policy {
 public:
  explicit FastestFirstBackups(bool backups = true) : backups_(backups), running_(2) {}
  std::string name() const override { return backups_ ? "fastest-first+backups" : "fastest-first"; }
  void device_joined(const sch::DeviceProfile& d, double now) override;
  void device_left(const std::string& d, double now) override;
  void task_started(const sch::TaskStart& s, double now) override;
  void task_finished(const sch::TaskEnd& e, double now) override;
  sch::Decision decide(const std::string& d, std::span<const sch::PendingJob> jobs, double now) override;

 private:
  struct Device {
    sch::DeviceProfile profile;
    bool online = false;
    int running = 0;
    int bucket = 0;
  };
  std::uint32_t index(const std::string& id);
  double expected_s(std::uint32_t d, const std::string& workload, double work) const;
  void set_idle(std::uint32_t d, bool idle);
  int faster_idle(int bucket) const;  // idle devices in faster buckets

  bool backups_;
  std::vector<Device> devices_;
  std::unordered_map<std::string, std::uint32_t> index_;
  std::vector<std::vector<std::string>> tasks_of_;  // by device: tasks it runs a copy of
  std::map<std::string, std::uint32_t> workloads_;
  std::vector<std::string> workload_names_;  // by index
  std::vector<int> fenwick_ = std::vector<int>(kBuckets + 1, 0);  // idle devices per score bucket
  int idle_ = 0;
  double sum_score_ = 0;
  // The coordinator's starvation rule (kStarvedAfter): a job nobody started a
  // task of for 2 s goes to any device that asks and may run it. Without it a
  // task only some devices may run (a tie break off the producers' networks)
  // can wait for hours while a faster device that may not run it sits idle.
  std::unordered_map<std::string, double> last_start_;
  int joined_ = 0;
  static constexpr int kBuckets = 2048;
  std::map<std::string, std::pair<double, double>> rate_;  // workload -> (sum log(work/(s*score)), n)
  std::unordered_map<std::string, double> started_;        // task/device -> start, for the rate
  sch::RunningTasks running_;
  std::vector<sch::RunningTasks::Candidate> candidates_;
};

}  // namespace poolsim
