#include "baselines.hpp"

#include <algorithm>
#include <cmath>

namespace poolsim {

using sch::Decision;
using sch::PendingJob;

namespace {

bool verify_entry(const std::string& job) { return job.size() > 7 && job.compare(job.size() - 7, 7, "#verify") == 0; }

Decision wait_for(double s) {
  Decision d;
  d.retry_after_s = s;
  return d;
}

Decision run(const std::string& job) {
  Decision d;
  d.kind = Decision::Kind::run;
  d.job = job;
  return d;
}

}  // namespace

// ---- static deals -----------------------------------------------------------

void StaticDeal::device_joined(const sch::DeviceProfile& d, double) {
  if (position_.count(d.id)) return;
  position_[d.id] = online_.size();
  online_.push_back(d.id);
}

void StaticDeal::device_left(const std::string& d, double) {
  auto it = position_.find(d);
  if (it == position_.end()) return;
  std::size_t pos = it->second;
  online_.erase(online_.begin() + static_cast<std::ptrdiff_t>(pos));
  position_.erase(it);
  for (std::size_t i = pos; i < online_.size(); ++i) position_[online_[i]] = i;
  // Its undone share goes back to be dealt again.
  if (auto dealt = dealt_.find(d); dealt != dealt_.end()) {
    for (const auto& [job, n] : dealt->second) outstanding_[job] -= n;
    dealt_.erase(dealt);
  }
}

void StaticDeal::deal(const std::string& job, std::int64_t n) {
  if (online_.empty()) return;
  for (std::int64_t i = 0; i < n; ++i) {
    std::size_t k = random_ ? static_cast<std::size_t>(rng_() % online_.size()) : next_++ % online_.size();
    dealt_[online_[k]][job] += 1;
    outstanding_[job] += 1;
  }
}

Decision StaticDeal::decide(const std::string& d, std::span<const PendingJob> jobs, double) {
  for (const auto& j : jobs) {
    if (j.pending <= 0) continue;
    if (verify_entry(j.id)) return run(j.id);
    std::int64_t surplus = j.pending - outstanding_[j.id];
    if (surplus > 0) deal(j.id, surplus);
    auto dev = dealt_.find(d);
    if (dev == dealt_.end()) continue;
    auto mine = dev->second.find(j.id);
    if (mine == dev->second.end() || mine->second <= 0) continue;
    mine->second -= 1;
    outstanding_[j.id] -= 1;
    return run(j.id);
  }
  // Nothing dealt to it: new deals come only when a device leaves.
  return wait_for(10.0);
}

// ---- first come, first served ---------------------------------------------------

Decision Fcfs::decide(const std::string&, std::span<const PendingJob> jobs, double) {
  for (const auto& j : jobs)
    if (j.pending > 0) return run(j.id);
  return wait_for(2.0);
}

// ---- fastest benchmark first, with backups ---------------------------------------

std::uint32_t FastestFirstBackups::index(const std::string& id) {
  auto [it, inserted] = index_.try_emplace(id, static_cast<std::uint32_t>(devices_.size()));
  if (inserted) {
    devices_.emplace_back();
    tasks_of_.emplace_back();
  }
  return it->second;
}

void FastestFirstBackups::set_idle(std::uint32_t d, bool idle) {
  int delta = idle ? 1 : -1;
  idle_ += delta;
  for (int i = devices_[d].bucket + 1; i <= kBuckets; i += i & -i) fenwick_[i] += delta;
}

int FastestFirstBackups::faster_idle(int bucket) const {
  int upto = 0;  // idle devices in buckets <= bucket
  for (int i = bucket + 1; i > 0; i -= i & -i) upto += fenwick_[i];
  return idle_ - upto;
}

void FastestFirstBackups::device_joined(const sch::DeviceProfile& p, double) {
  auto d = index(p.id);
  auto& dev = devices_[d];
  if (dev.online) return;
  dev.profile = p;
  dev.online = true;
  dev.running = 0;
  dev.bucket = std::clamp(static_cast<int>(std::floor(std::log2(std::max(p.score, 1.0)) * 32)), 0, kBuckets - 1);
  sum_score_ += p.score;
  joined_ += 1;
  set_idle(d, true);
}

void FastestFirstBackups::device_left(const std::string& id, double) {
  auto it = index_.find(id);
  if (it == index_.end() || !devices_[it->second].online) return;
  auto d = it->second;
  for (const auto& t : tasks_of_[d]) running_.end(t, d, false);
  tasks_of_[d].clear();
  if (devices_[d].running == 0) set_idle(d, false);
  devices_[d].running = 0;
  devices_[d].online = false;
}

double FastestFirstBackups::expected_s(std::uint32_t d, const std::string& workload, double work) const {
  // Benchmark scores scaled by the pool-wide work-per-score rate of the
  // workload; before anything finished, a typical task is a minute on an average device.
  double score = std::max(devices_[d].profile.score, 1e-9);
  auto r = rate_.find(workload);
  if (r == rate_.end() || r->second.second == 0) return 60.0 * (sum_score_ / std::max(joined_, 1)) / score;
  return work / (score * std::exp(r->second.first / r->second.second));
}

void FastestFirstBackups::task_started(const sch::TaskStart& s, double now) {
  last_start_[s.job] = now;
  auto it = index_.find(s.device);
  if (it == index_.end() || !devices_[it->second].online) return;
  auto d = it->second;
  auto [w_it, added] = workloads_.try_emplace(s.workload, static_cast<std::uint32_t>(workloads_.size()));
  if (added) workload_names_.push_back(s.workload);
  auto w = w_it->second;
  sch::RunningTasks::Task info;
  info.job = s.job;
  info.workload = w;
  info.work = s.expected_work;
  info.preference = s.preference;
  if (!running_.start(s.task, info, {d, now, expected_s(d, s.workload, s.expected_work)})) return;
  tasks_of_[d].push_back(s.task);
  started_[s.task + "/" + s.device] = now;
  if (devices_[d].running++ == 0) set_idle(d, false);
}

void FastestFirstBackups::task_finished(const sch::TaskEnd& e, double now) {
  auto it = index_.find(e.device);
  if (it == index_.end()) return;
  auto d = it->second;
  auto& mine = tasks_of_[d];
  auto t = std::find(mine.begin(), mine.end(), e.task);
  if (t == mine.end()) return;
  mine.erase(t);
  const auto* info = running_.find(e.task);
  auto key = e.task + "/" + e.device;
  if (e.outcome == sch::Outcome::ok && info) {
    double elapsed = e.elapsed_s >= 0 ? e.elapsed_s : now - started_[key];
    if (elapsed > 0) {
      auto& r = rate_[workload_names_[info->workload]];
      r.first += std::log(info->work / (elapsed * std::max(devices_[d].profile.score, 1e-9)));
      r.second += 1;
    }
  }
  started_.erase(key);
  running_.end(e.task, d, e.outcome == sch::Outcome::ok);
  if (--devices_[d].running == 0 && devices_[d].online) set_idle(d, true);
}

Decision FastestFirstBackups::decide(const std::string& id, std::span<const PendingJob> jobs, double now) {
  auto it = index_.find(id);
  if (it == index_.end() || !devices_[it->second].online) return wait_for(2.0);
  auto d = it->second;
  std::int64_t pending = 0;
  for (const auto& j : jobs) pending += std::max<std::int64_t>(j.pending, 0);
  if (pending > 0) {
    for (const auto& j : jobs)  // starved: whoever may run it
      if (j.pending > 0 && now - last_start_.try_emplace(j.id, now).first->second > 2.0) return run(j.id);
    // Part 1's rule: the `pending` fastest idle devices get work, in job order.
    if (faster_idle(devices_[d].bucket) >= pending) return wait_for(1.0);
    for (const auto& j : jobs)
      if (j.pending > 0) return run(j.id);
  }
  // Nothing pending: back up the worst straggler this device would beat.
  Decision best = wait_for(2.0);
  if (!backups_) return best;
  double best_gain = 0;
  for (const auto* job : running_.jobs()) {
    running_.stragglers(*job, now, 0.5, 8, candidates_);
    for (const auto& c : candidates_) {
      bool clash = std::any_of(c.info->copies.begin(), c.info->copies.end(), [&](const auto& x) {
        return x.device == d || devices_[x.device].profile.peer == devices_[d].profile.peer;
      });
      if (clash) continue;
      double mine = expected_s(d, workload_names_[c.info->workload], c.info->work);
      double gain = c.expected_end - (now + mine);
      if (now + 1.2 * mine < c.expected_end && gain > best_gain) {
        best_gain = gain;
        best.kind = Decision::Kind::backup;
        best.job = c.info->job;
        best.task = *c.task;
        best.expected_s = mine;
      }
    }
  }
  return best;
}

}  // namespace poolsim
