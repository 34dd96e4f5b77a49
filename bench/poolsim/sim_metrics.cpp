#include "sim_state.hpp"

#include <algorithm>
#include <cstdio>

namespace poolsim::detail {

void Sim::trace() {
  int present = 0, busy = 0, busy_slow = 0, idle_fast = 0;
  for (const auto& d : devices_) {
    if (!d.present) continue;
    present += 1;
    bool slow = d.spec.speed[kRender] < 3;
    if (d.attempt >= 0) {
      busy += 1;
      busy_slow += slow;
    } else if (d.spec.speed[kRender] > 8) {
      idle_fast += 1;
    }
  }
  std::fprintf(stderr, "t=%7.0f online %5d busy %5d (slow %4d) idle-fast %4d |", now_, present, busy, busy_slow,
               idle_fast);
  for (const auto& j : jobs_)
    if (j.submitted && !j.done)
      std::fprintf(stderr, " %s q%zu v%zu open%d", j.spec.id.c_str(), j.queue.size(), j.verify.size(), j.open);
  std::fprintf(stderr, "\n");
}

Metrics Sim::collect() {
  Metrics m;
  m.policy = policy_.name();
  double t0 = kTimeLimit, t1 = 0;
  for (const auto& j : jobs_) {
    if (!j.spec.measured) continue;
    t0 = std::min(t0, j.spec.submit_s);
    if (!j.done) m.finished = false;
    t1 = std::max(t1, j.done ? j.done_at : now_);
  }
  m.makespan_s = t1 - t0;
  for (auto& dev : devices_) {
    if (dev.present) dev.online.push_back({dev.since, t1});
    bool seen = false;
    for (const auto& [from, to] : dev.online) {
      double overlap = std::min(to, t1) - std::max(from, t0);
      if (overlap > 0) {
        m.available_s += overlap;
        seen = true;
      }
      if (from <= t0 && to > t0) m.devices_online_at_start += 1;
    }
    if (seen && dev.spec.cheater) {
      m.cheaters += 1;
      if (dev.spec.history == 0) {
        m.new_cheaters += 1;
        m.new_cheaters_excluded += dev.excluded;
      }
    }
  }
  for (const auto& a : attempts_) {
    const auto& q = requests_[a.request];
    if (!jobs_[q.job].spec.measured) continue;
    double stop = a.fate == Fate::running ? now_ : a.stop;
    double busy = std::max(0.0, stop - a.start);
    m.total_s += busy + a.check_s;
    m.verification_s += a.check_s;
    m.check_s += a.check_s;
    m.cost += busy * a.price / 3600.0;
    m.backups += a.backup;
    if (a.fate == Fate::lost) m.lost_runs += 1;
    if (a.fate == Fate::failed) m.failed_runs += 1;
    if (q.purpose != Purpose::primary) {
      m.verification_s += busy;
      if (a.valid) m.paid += busy * a.price / 3600.0;
      switch (q.purpose) {
        case Purpose::replica: m.replica_s += busy; break;
        case Purpose::known_answer: m.known_answer_s += busy; break;
        case Purpose::tiebreak: m.tie_break_s += busy; break;
        case Purpose::audit: m.audit_s += busy; break;
        case Purpose::primary: break;
      }
      continue;
    }
    bool useful = a.fate == Fate::result && a.first_result && a.value == tasks_[q.task].value;
    if (useful) {
      m.useful_s += busy;
      m.paid += busy * a.price / 3600.0;
    } else if (a.fate == Fate::failed || a.fate == Fate::lost || (a.fate == Fate::result && a.first_result)) {
      m.lost_s += busy;  // failed, died with its device, or a wrong result thrown away
    } else {
      m.duplicate_s += busy;
    }
  }
  for (const auto& t : tasks_) {
    if (!jobs_[t.job].spec.measured) continue;
    m.tasks += 1;
    for (const auto& r : t.results) {
      if (r.value == 0) continue;
      m.wrong_returned += 1;
      m.wrong_caught += r.judged == Result::Judged::invalid;
      m.new_wrong_returned += devices_[r.device].spec.history == 0;
    }
    if (t.accepted && t.value != 0) {
      m.wrong_accepted += 1;
      m.wrong_accepted_by_workload[jobs_[t.job].spec.workload] += 1;
      // The accepted wrong value came from the result that holds it.
      for (const auto& r : t.results)
        if (r.value == t.value) {
          m.new_wrong_accepted += devices_[r.device].spec.history == 0;
          break;
        }
    }
  }
  for (const auto& q : requests_) {
    if (!jobs_[q.job].spec.measured) continue;
    m.replicas += q.purpose == Purpose::replica;
    m.known_answer_tasks += q.purpose == Purpose::known_answer;
    m.tie_breaks += q.purpose == Purpose::tiebreak;
    m.audits += q.purpose == Purpose::audit;
  }
  for (const auto& a : attempts_)
    if (a.purpose == Purpose::known_answer && jobs_[requests_[a.request].job].spec.measured && a.fate == Fate::result &&
        a.value != 0) {
      m.wrong_returned += 1;
      m.wrong_caught += 1;
      m.new_wrong_returned += devices_[a.device].spec.history == 0;
    }
  m.cheaters_excluded = cheaters_excluded_;
  m.honest_excluded = honest_excluded_;
  m.decisions = static_cast<std::int64_t>(decide_us_.size());
  if (!decide_us_.empty()) {
    double sum = 0;
    for (float v : decide_us_) sum += v;
    m.decide_mean_us = sum / static_cast<double>(decide_us_.size());
    auto p99 = decide_us_.begin() + static_cast<std::ptrdiff_t>(decide_us_.size() * 99 / 100);
    std::nth_element(decide_us_.begin(), p99, decide_us_.end());
    m.decide_p99_us = *p99;
    auto p50 = decide_us_.begin() + static_cast<std::ptrdiff_t>(decide_us_.size() / 2);
    std::nth_element(decide_us_.begin(), p50, p99);
    m.decide_p50_us = *p50;
    m.decide_max_us = *std::max_element(decide_us_.begin(), decide_us_.end());
  }
  return m;
}

}  // namespace poolsim::detail
