#pragma once
// The copies of tasks that are running now, and per job the tasks that may
// still get a backup copy, ordered two ways so that the worst straggler is
// found in O(log n): by planned end (start + the runner's expected time) and
// by start (the longest overdue). A task's expected end is its planned end
// while that lies ahead, and now + overdue_factor * elapsed once it is
// overdue (the longer a task has overrun, the longer it is expected to need).
//
// Ties and saved state are ordered by task id, so nothing depends on hashing
// or on the order state was rebuilt in.
// Not thread-safe.

#include "core/error.hpp"
#include "pool/scheduling/types.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace runsnack::pool::scheduling {

class RunningTasks {
 public:
  struct Copy {
    std::uint32_t device = 0;
    double start = 0;
    double expected_s = 0;  // the runner's expected time when it started
  };
  struct Task {
    std::string job;        // empty: not backed up (hidden known-answer task)
    std::uint32_t workload = 0;
    double work = 1;
    Preference preference = Preference::balanced;
    bool done = false;      // a copy returned a result; the others just occupy devices
    std::vector<Copy> copies;
  };

  explicit RunningTasks(int max_copies = 2) : max_copies_(max_copies) {}

  // False when `device` already runs a copy of `task`.
  bool start(const std::string& task, Task info, Copy copy);
  // Ends the copy of `task` on `device` (false when there is none); with
  // `result`, the task is done and no longer a backup candidate.
  bool end(const std::string& task, std::uint32_t device, bool result);
  const Task* find(const std::string& task) const;

  // The backup candidates of `job` with the latest expected ends, latest
  // first: up to `limit` from each ordering (planned end, start), merged.
  struct Candidate {
    const std::string* task = nullptr;
    const Task* info = nullptr;
    double expected_end = 0;
  };
  void stragglers(const std::string& job, double now, double overdue_factor, std::size_t limit,
                  std::vector<Candidate>& out) const;
  // How many of `job`'s backup candidates are planned to end after `t` (at most `cap`).
  std::size_t ending_after(const std::string& job, double t, std::size_t cap) const;
  // Jobs with backup candidates, in id order.
  std::vector<const std::string*> jobs() const;
  std::size_t size() const { return tasks_.size(); }
  void clear();

  nlohmann::json save() const;
  // `devices` and `workloads` bound the indices accepted.
  Result<void> load(const nlohmann::json& j, std::size_t devices, std::size_t workloads);
  // Every running copy, for rebuilding device state after load.
  template <class F>
  void for_each_copy(F&& f) const {
    for (const auto& [id, t] : tasks_)
      for (const auto& c : t.copies) f(id, t, c);
  }

 private:
  using Entry = std::unordered_map<std::string, Task>::value_type;  // node-based: stable address
  using Key = std::pair<double, const Entry*>;
  struct KeyLess {
    bool operator()(const Key& a, const Key& b) const {
      return a.first != b.first ? a.first < b.first : a.second->first < b.second->first;
    }
  };
  struct JobSets {
    std::set<Key, KeyLess> by_end, by_start;
  };
  void list(const Entry& e);
  void unlist(const Entry& e);
  static double planned_end(const Task& t);
  static double first_start(const Task& t);

  int max_copies_;
  std::unordered_map<std::string, Task> tasks_;
  std::map<std::string, JobSets> jobs_;
};

}  // namespace runsnack::pool::scheduling
