#include "pool/scheduling/scheduler.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace runsnack::pool::scheduling {

Scheduler::Scheduler(SchedulerConfig config, std::uint64_t seed)
    : config_(config), rng_(seed), est_(config.estimates), running_(config.max_copies) {}

std::optional<std::uint32_t> Scheduler::find(const std::string& id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

double Scheduler::profile_log_score(std::uint32_t d) const {
  return std::log(std::max(devices_[d].profile.score, 1e-12));
}

void Scheduler::mark_checked() {
  const auto& checked = config_.checked_by_computation;
  checked_.assign(est_.workloads(), false);
  for (std::uint32_t w = 0; w < checked_.size(); ++w)
    checked_[w] = std::find(checked.begin(), checked.end(), est_.workload_name(w)) != checked.end();
}

double Scheduler::verification(std::uint32_t d, std::uint32_t w) const {
  if (w < checked_.size() && checked_[w]) return 0;  // checked on arrival: no replica
  return devices_[d].verification;
}

CapacityGrid::Member Scheduler::member(std::uint32_t d, std::uint32_t w) const {
  return {est_.relative_speed(d, w), devices_[d].profile.price_per_hour, est_.success_mean(d), est_.departure_rate(d),
          verification(d, w)};
}

void Scheduler::place(std::uint32_t d, std::uint32_t w, const CapacityGrid::Member& m) {
  auto& dev = devices_[d];
  if (dev.placed.size() <= w) dev.placed.resize(w + 1);
  dev.placed[w] = m;
  grids_[w].set(d, m);
}

void Scheduler::refresh(std::uint32_t d) {
  if (!devices_[d].online) return;
  for (std::uint32_t w = 0; w < grids_.size(); ++w) place(d, w, member(d, w));
}

std::uint32_t Scheduler::workload(const std::string& name, double typical_work) {
  if (auto w = est_.find_workload(name)) return *w;
  // Rare (a workload seen for the first time): a pass over the devices is fine.
  double sum = 0;
  for (std::uint32_t d = 0; d < devices_.size(); ++d)
    if (devices_[d].online) sum += profile_log_score(d);
  double mean_log_score = online_ > 0 ? sum / static_cast<double>(online_) : 0.0;
  auto w = est_.add_workload(name, typical_work, mean_log_score);
  grids_.resize(est_.workloads());
  mark_checked();
  for (std::uint32_t d = 0; d < devices_.size(); ++d) {
    if (!devices_[d].online) continue;
    place(d, w, member(d, w));
    mark_busy(d);
  }
  return w;
}

void Scheduler::mark_busy(std::uint32_t d) {
  const auto& dev = devices_[d];
  if (dev.running.empty()) {
    for (auto& g : grids_) g.set_idle(d);
    return;
  }
  double free_at = 0;
  for (const auto& task : dev.running)
    if (const auto* t = running_.find(task))
      for (const auto& c : t->copies)
        if (c.device == d) free_at = std::max(free_at, c.start + c.expected_s);
  for (auto& g : grids_) g.set_busy(d, free_at);
}

void Scheduler::device_joined(const DeviceProfile& profile, double now_s) {
  std::uint32_t d;
  if (auto found = find(profile.id)) {
    d = *found;
  } else {
    d = static_cast<std::uint32_t>(devices_.size());
    devices_.push_back({});
    index_.emplace(profile.id, d);
    est_.add_device(d, profile.score);
  }
  auto& dev = devices_[d];
  if (!dev.online) {
    dev.online = true;
    dev.since = now_s;
    ++online_;
  }
  dev.profile = profile;
  est_.set_score(d, profile.score);
  refresh(d);
  mark_busy(d);
}

void Scheduler::device_left(const std::string& id, double now_s) {
  auto d = find(id);
  if (!d || !devices_[*d].online) return;
  auto& dev = devices_[*d];
  for (const auto& task : dev.running) running_.end(task, *d, false);
  dev.running.clear();
  est_.observe_session(*d, now_s - dev.since, true);
  for (auto& g : grids_) g.erase(*d);
  dev.online = false;
  --online_;
}

void Scheduler::forget_sessions(double now_s) {
  for (std::uint32_t d = 0; d < devices_.size(); ++d) {
    auto& dev = devices_[d];
    if (!dev.online) continue;
    est_.observe_session(d, now_s - dev.since, false);
    dev.online = false;
    dev.running.clear();
    for (auto& g : grids_) g.erase(d);
  }
  running_.clear();
  online_ = 0;
}

void Scheduler::task_started(const TaskStart& s, double now_s) {
  auto d = find(s.device);
  if (!d || !devices_[*d].online || !(s.expected_work > 0) || !std::isfinite(s.expected_work)) return;
  auto w = workload(s.workload, s.expected_work);
  double expected_s = est_.task_seconds(*d, w, s.expected_work);
  RunningTasks::Task info;
  info.job = s.job;
  info.workload = w;
  info.work = s.expected_work;
  info.preference = s.preference;
  if (!running_.start(s.task, std::move(info), {*d, now_s, expected_s})) return;
  devices_[*d].running.push_back(s.task);
  mark_busy(*d);
}

void Scheduler::end_copy(std::uint32_t d, const std::string& task, Outcome outcome, double elapsed_s, double now_s) {
  const auto* t = running_.find(task);
  if (!t) return;
  auto copy = std::find_if(t->copies.begin(), t->copies.end(), [&](const auto& c) { return c.device == d; });
  if (copy == t->copies.end()) return;
  double elapsed = elapsed_s >= 0 ? elapsed_s : now_s - copy->start;
  bool learned = true;
  switch (outcome) {
    case Outcome::ok:
      est_.observe_speed(d, t->workload, t->work, elapsed);
      est_.observe_success(d);
      break;
    case Outcome::failed:
    case Outcome::lost: est_.observe_failure(d); break;
    case Outcome::invalid: est_.observe_invalid(d, false); break;
    case Outcome::cancelled: learned = false; break;
  }
  running_.end(task, d, outcome == Outcome::ok);
  auto& running = devices_[d].running;
  running.erase(std::find(running.begin(), running.end(), task));
  if (learned) refresh(d);
  mark_busy(d);
}

void Scheduler::task_finished(const TaskEnd& e, double now_s) {
  auto d = find(e.device);
  if (!d) return;
  const auto& running = devices_[*d].running;
  if (std::find(running.begin(), running.end(), e.task) == running.end()) return;
  end_copy(*d, e.task, e.outcome, e.elapsed_s, now_s);
}

void Scheduler::verdict(const std::string& device, bool valid) {
  auto d = find(device);
  if (!d || valid) return;
  est_.observe_invalid(*d, true);
  refresh(*d);
}

void Scheduler::set_verification(const std::string& device, double probability) {
  auto d = find(device);
  if (!d || !(probability >= 0)) return;
  devices_[*d].verification = std::min(probability, 1.0);
  refresh(*d);
}

double Scheduler::horizon(Preference p) const {
  switch (p) {
    case Preference::fast: return config_.horizon_fast;
    case Preference::cheap: return config_.horizon_cheap;
    case Preference::balanced: return config_.horizon_balanced;
  }
  return config_.horizon_balanced;
}

double Scheduler::backup_gain(Preference p) const {
  switch (p) {
    case Preference::fast: return config_.backup_gain_fast;
    case Preference::cheap: return config_.backup_gain_cheap;
    case Preference::balanced: return config_.backup_gain_balanced;
  }
  return config_.backup_gain_balanced;
}

Decision Scheduler::decide(const std::string& device, std::span<const PendingJob> jobs, double now_s) {
  Decision wait;
  wait.retry_after_s = config_.max_retry_s;
  auto found = find(device);
  if (!found || !devices_[*found].online) return wait;
  const std::uint32_t d = *found;
  const auto& profile = devices_[d].profile;

  // All pending work, in seconds at relative speed 1: every job competes for
  // the same devices, so D is measured against all of it.
  std::vector<std::pair<std::uint32_t, double>> unit(jobs.size(), {0, 0});  // (workload, unit_s)
  double demand = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    const auto& j = jobs[i];
    if (j.pending <= 0 || !(j.typical_work > 0) || !std::isfinite(j.typical_work)) continue;
    auto w = workload(j.workload, j.typical_work);
    unit[i] = {w, j.typical_work / std::exp(est_.log_unit(w))};
    demand += static_cast<double>(j.pending) * unit[i].second;
  }

  // One Thompson draw per workload and one for success: an uncertain
  // device sometimes looks better than its mean and so gets tried.
  const double success = est_.sample_success(d, rng_);
  const double rate = est_.departure_rate(d);
  std::vector<double> offset(est_.workloads(), std::numeric_limits<double>::quiet_NaN());
  std::vector<double> remaining(est_.workloads(), -1);  // seconds the pool needs for the pending work
  std::vector<double> mean_speed(est_.workloads(), 0);
  struct Choice {
    std::size_t job;
    double task_s, key;
  };
  std::optional<Choice> fits, shortest;
  double min_task_s = std::numeric_limits<double>::infinity();
  double pending_end = now_s;  // when the pool would be through the pending work
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    auto [w, unit_s] = unit[i];
    if (unit_s <= 0) continue;
    const auto& j = jobs[i];
    if (std::isnan(offset[w])) {
      offset[w] = est_.sample_offset(d, w, rng_);
      double total = std::max(grids_[w].total_speed(), 1e-300);
      remaining[w] = demand / total;
      mean_speed[w] = total / static_cast<double>(std::max<std::size_t>(grids_[w].size(), 1));
    }
    // D's time to a counted result: its run, and a replica when its results still need one.
    const double replica_s = unit_s / std::max(mean_speed[w], 1e-300);
    double task_s = est_.task_seconds_at(d, w, j.typical_work, offset[w]) + verification(d, w) * replica_s;
    double reliability = success * std::exp(-rate * task_s);
    CapacityGrid::Query q;
    q.now = now_s;
    q.horizon_s = task_s * horizon(j.preference);
    q.unit_s = unit_s;
    q.replica_s = replica_s;
    q.preference = j.preference;
    q.threshold = preference_score(j.preference, task_s, profile.price_per_hour, reliability) * (1.0 - config_.better_by);
    q.exclude = d;
    q.target = demand / unit_s * (1.0 + config_.need_margin) + config_.need_extra;
    min_task_s = std::min(min_task_s, task_s);
    pending_end = std::max(pending_end, now_s + remaining[w]);
    // Needed: the better devices cannot absorb the pending work in time.
    if (grids_[w].covers(q)) continue;
    // Which job: where D has the comparative advantage (its speed in the
    // workload over the pool's mean there), then the longest tasks, counted
    // by their workload's tail; only tasks D ends well before the pool is
    // through the pending work, so that slow devices never hold the end. A
    // device too slow for all of them takes the shortest.
    double tail = std::exp(config_.tail_z * est_.spread(w));
    double advantage = std::exp(profile_log_score(d) + offset[w]) / std::max(mean_speed[w], 1e-300);
    double key = std::pow(advantage, config_.advantage_power) * unit_s * tail;
    if (task_s * tail <= config_.fit_share * remaining[w]) {
      if (!fits || key > fits->key) fits = Choice{i, task_s, key};
    } else if (!shortest || task_s * tail < shortest->key) {
      shortest = Choice{i, task_s, task_s * tail};
    }
  }
  auto choice = fits ? fits : shortest;
  // A straggler that would end after the pool is through the pending work
  // is worth more than one more pending task.
  if (auto b = backup(d, jobs, now_s, choice ? pending_end : now_s)) return *b;
  if (choice) {
    Decision run;
    run.kind = Decision::Kind::run;
    run.job = jobs[choice->job].id;
    run.expected_s = choice->task_s;
    return run;
  }
  if (std::isfinite(min_task_s))
    wait.retry_after_s = std::clamp(config_.retry_share * min_task_s, config_.min_retry_s, config_.max_retry_s);
  else if (running_.size() > 0)
    wait.retry_after_s = config_.min_retry_s;  // near the end: a straggler may need a copy any moment
  return wait;
}

std::optional<Decision> Scheduler::backup(std::uint32_t d, std::span<const PendingJob> jobs, double now_s,
                                          double pending_end) {
  // Means, not draws: exploring is for new work, a copy is a bet on this device.
  const auto& me = devices_[d].profile;
  const double success = est_.success_mean(d);
  const double rate = est_.departure_rate(d);
  std::optional<Decision> out;
  std::uint32_t out_workload = 0;
  double best_gain = 0, out_reliability = 1;
  std::size_t stragglers = 0;  // tasks D could usefully copy
  // Per workload, once: D's seconds per unit of work, and what a replica adds per unit.
  per_work_.assign(est_.workloads(), -1);
  replica_per_work_.assign(est_.workloads(), 0);
  for (const auto* job : running_.jobs()) {
    // Near the end only: a job with tasks still pending is not backed up.
    bool pending = std::any_of(jobs.begin(), jobs.end(), [&](const PendingJob& j) { return j.pending > 0 && j.id == *job; });
    if (pending) continue;
    running_.stragglers(*job, now_s, config_.overdue_factor, config_.straggler_candidates, candidates_);
    for (const auto& c : candidates_) {
      if (c.expected_end <= pending_end) break;  // latest first: the rest end sooner still
      bool clash = std::any_of(c.info->copies.begin(), c.info->copies.end(), [&](const RunningTasks::Copy& x) {
        return x.device == d || devices_[x.device].profile.peer == me.peer;
      });
      if (clash) continue;
      const auto w = c.info->workload;
      if (per_work_[w] < 0) {
        per_work_[w] = est_.task_seconds(d, w, 1.0);
        double mean_speed = grids_[w].total_speed() / static_cast<double>(std::max<std::size_t>(grids_[w].size(), 1));
        replica_per_work_[w] = verification(d, w) / std::exp(est_.log_unit(w)) / std::max(mean_speed, 1e-300);
      }
      double task_s = c.info->work * (per_work_[w] + replica_per_work_[w]);
      double reliability = std::max(success * std::exp(-rate * task_s), 1e-6);
      if (now_s + task_s / reliability * backup_gain(c.info->preference) >= c.expected_end) continue;
      stragglers += 1;
      double gain = c.expected_end - (now_s + task_s);
      if (gain > best_gain) {
        best_gain = gain;
        out_workload = w;
        out_reliability = reliability;
        Decision b;
        b.kind = Decision::Kind::backup;
        b.job = c.info->job;
        b.task = *c.task;
        b.expected_s = task_s;
        out = b;
      }
    }
  }
  if (!out) return out;
  // Leave the copies to better devices when they can make all of them
  // sooner than D: the first idle device to ask is not necessarily a good
  // one to hold the end of a job.
  const auto* info = running_.find(out->task);
  CapacityGrid::Query q;
  q.now = now_s;
  q.horizon_s = out->expected_s;
  q.unit_s = info->work / std::exp(est_.log_unit(out_workload));
  q.preference = Preference::fast;
  q.threshold = out->expected_s / out_reliability * (1.0 - config_.better_by);
  q.exclude = d;
  q.target = static_cast<double>(stragglers) + config_.need_extra;
  if (grids_[out_workload].covers(q)) return std::nullopt;
  return out;
}

std::optional<Scheduler::Estimate> Scheduler::estimate(const std::string& device, const std::string& workload,
                                                       double work) const {
  auto d = find(device);
  auto w = est_.find_workload(workload);
  if (!d || !w) return std::nullopt;
  return Estimate{est_.task_seconds(*d, *w, work), est_.offset_sd(*d, *w),       est_.observations(*d, *w),
                  est_.workload_observations(*w),       est_.success_mean(*d), est_.departure_rate(*d)};
}

std::vector<FrontPoint> Scheduler::pareto_front(const PendingJob& job) const {
  auto w = est_.find_workload(job.workload);
  if (!w || !(job.typical_work > 0)) return {};
  double unit_s = job.typical_work / std::exp(est_.log_unit(*w));
  double mean_speed = grids_[*w].total_speed() / static_cast<double>(std::max<std::size_t>(grids_[*w].size(), 1));
  return grids_[*w].pareto_front(unit_s, unit_s / std::max(mean_speed, 1e-300));
}

}  // namespace runsnack::pool::scheduling
