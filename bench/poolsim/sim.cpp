#include "sim_state.hpp"

#include <algorithm>
#include <chrono>

namespace poolsim {
namespace detail {

void Sim::poll_soon(int d, double delay) {
  auto& dev = devices_[d];
  dev.poll_token += 1;
  push(now_ + delay, Ev::poll, d, dev.poll_token);
}

void Sim::poll(int d) {
  auto& dev = devices_[d];
  if (!dev.present || !dev.known || dev.attempt >= 0) return;
  bool any_open = std::any_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return j.submitted && !j.done; });
  if (!any_open) return;  // idle until the next submission polls it
  pending_.clear();
  for (const auto& j : jobs_) {
    if (!j.submitted || j.done) continue;
    std::int64_t v = 0;
    for (int r : j.verify) v += eligible(d, requests_[r]);
    auto pref = *sch::parse_preference(j.spec.preference);
    const char* w = workload_name(j.spec.workload);
    if (v > 0) pending_.push_back({j.verify_id, w, pref, v, j.spec.mean_work});
    if (!j.queue.empty())
      pending_.push_back({j.spec.id, w, pref, static_cast<std::int64_t>(j.queue.size()), j.spec.mean_work});
  }

  auto t0 = std::chrono::steady_clock::now();
  Decision dec = policy_.decide(dev.spec.id, pending_, now_);
  auto t1 = std::chrono::steady_clock::now();
  decide_us_.push_back(std::chrono::duration<float, std::micro>(t1 - t0).count());

  if (dec.kind == Decision::Kind::wait) {
    poll_soon(d, std::max(0.5, dec.retry_after_s));
    return;
  }
  auto jit = job_by_entry_.find(dec.job);
  if (jit == job_by_entry_.end()) {
    poll_soon(d, 1.0);
    return;
  }
  auto& job = jobs_[jit->second];
  if (dec.kind == Decision::Kind::backup) {
    auto r = request_by_id_.find(dec.task);
    if (r == request_by_id_.end()) return poll_soon(d, 1.0);
    const auto& q = requests_[r->second];
    bool mine = std::any_of(q.attempts.begin(), q.attempts.end(), [&](int a) { return attempts_[a].device == d; });
    if (q.done || q.attempts.empty() || mine || !eligible(d, q)) return poll_soon(d, 1.0);
    return start(d, r->second, true);
  }
  // A claim. New devices get their hidden known-answer tasks among their first claims.
  if (trust_.known_answer_now(dev.spec.id)) {
    Request q;
    q.job = jit->second;
    q.purpose = Purpose::known_answer;
    q.id = "kat:" + dev.spec.id + ":" + std::to_string(dev.known_answers++);
    q.key = mix(c_.seed, 0x6a7, dev.slot * 1000003ULL + dev.identity, dev.known_answers);
    q.work = job.spec.mean_work * std::exp(0.3 * normal_draw(q.key) - 0.045);
    requests_.push_back(q);
    request_by_id_[q.id] = static_cast<int>(requests_.size() - 1);
    return start(d, static_cast<int>(requests_.size() - 1), false);
  }
  bool verify = dec.job == job.verify_id;
  if (verify) {
    auto it = std::find_if(job.verify.begin(), job.verify.end(), [&](int r) { return eligible(d, requests_[r]); });
    if (it == job.verify.end()) return poll_soon(d, 1.0);
    int r = *it;
    job.verify.erase(it);
    return start(d, r, false);
  }
  if (job.queue.empty()) return poll_soon(d, 1.0);
  int r = job.queue.front();
  job.queue.pop_front();
  start(d, r, false);
}

void Sim::start(int d, int r, bool backup) {
  auto& dev = devices_[d];
  auto& q = requests_[r];
  const auto& job = jobs_[q.job];
  const std::uint64_t k = mix(q.key, dev.slot * 1000003ULL + dev.identity, q.runs++);
  Attempt a;
  a.request = r;
  a.device = d;
  a.start = now_;
  a.purpose = q.purpose;
  a.backup = backup;
  a.price = dev.spec.price_per_hour;
  double duration = q.work / dev.spec.speed[job.spec.workload] * std::exp(0.05 * normal_draw(k ^ 1));
  a.fails = unit(k ^ 2) < dev.spec.fail_p;
  a.end = now_ + (a.fails ? duration * unit(k ^ 3) : duration);
  double wrong_p = dev.spec.cheater ? dev.spec.cheat_p : dev.spec.silent_error_p;
  // Colluders agree on one wrong value per task; other wrong values all differ.
  const std::uint64_t wrong = dev.spec.cheater && c_.colluding && q.task >= 0
                                  ? mix(c_.seed, 0xc011, static_cast<std::uint64_t>(q.task))
                                  : mix(k, 0xbad);
  a.value = unit(k ^ 4) < wrong_p ? (wrong | 1) : 0;
  int id = static_cast<int>(attempts_.size());
  attempts_.push_back(a);
  q.attempts.push_back(id);
  dev.attempt = id;
  std::string entry = q.purpose == Purpose::known_answer ? ""
                      : q.purpose == Purpose::primary    ? job.spec.id
                                                         : job.verify_id;
  policy_.task_started({q.id, dev.spec.id, entry, workload_name(job.spec.workload),
                        *sch::parse_preference(job.spec.preference), job.spec.mean_work},
                       now_);
  push(a.end, Ev::end, id);
}

void Sim::stop_copy(int id, Fate fate, Outcome told) {
  auto& a = attempts_[id];
  auto& dev = devices_[a.device];
  a.fate = fate;
  a.stop = now_;
  dev.attempt = -1;
  auto& q = requests_[a.request];
  q.attempts.erase(std::find(q.attempts.begin(), q.attempts.end(), id));
  policy_.task_finished({q.id, dev.spec.id, told, now_ - a.start}, now_);
  poll_soon(a.device, 0);
}

void Sim::end(int id) {
  auto& a = attempts_[id];
  if (a.fate != Fate::running || devices_[a.device].attempt != id) return;  // lost or cancelled before
  int r = a.request;
  if (a.fails) {
    stop_copy(id, Fate::failed, Outcome::failed);
    if (!requests_[r].done && requests_[r].attempts.empty()) requeue(r);
    return;
  }
  stop_copy(id, Fate::result, Outcome::ok);
  auto& q = requests_[r];
  if (q.done) return;  // another copy delivered first
  q.done = true;
  attempts_[id].first_result = true;
  deliver(r, id);
  // The other copies are cancelled, except that a copy of a primary still
  // running on an independent device becomes the replica the result needs.
  int replica = open_replica_of_.count(r) ? open_replica_of_[r] : -1;
  for (int other : std::vector<int>(requests_[r].attempts)) {
    if (replica >= 0 && eligible(attempts_[other].device, requests_[replica]) && requests_[replica].attempts.empty()) {
      adopt(other, replica);
      continue;
    }
    stop_copy(other, Fate::cancelled, Outcome::cancelled);
  }
  open_replica_of_.erase(r);
}

Metrics Sim::run() {
  for (const auto& spec : job_specs(c_)) {
    Job j;
    j.spec = spec;
    j.verify_id = spec.id + "#verify";
    int ji = static_cast<int>(jobs_.size());
    job_by_entry_[spec.id] = ji;
    job_by_entry_[j.verify_id] = ji;
    jobs_.push_back(std::move(j));
    push(spec.submit_s, Ev::submit, ji);
  }
  if (c_.trace_s > 0) push(0, Ev::trace, 0);
  slot_device_.assign(c_.devices, -1);
  for (int s = 0; s < c_.devices; ++s) join(s, 0);
  auto measured_done = [&] {
    return std::all_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return !j.spec.measured || j.done; });
  };
  while (!events_.empty() && !measured_done()) {
    Event e = events_.top();
    events_.pop();
    if (e.t > kTimeLimit) break;
    now_ = e.t;
    switch (e.type) {
      case Ev::poll:
        if (devices_[e.a].poll_token == e.b) poll(e.a);
        break;
      case Ev::end: end(e.a); break;
      case Ev::leave: leave(e.a, static_cast<int>(e.b)); break;
      case Ev::join: join(e.a, static_cast<int>(e.b)); break;
      case Ev::detect:
        if (devices_[e.a].epoch == e.b && !devices_[e.a].present) notice_departure(e.a);
        break;
      case Ev::trace:
        trace();
        push(now_ + c_.trace_s, Ev::trace, 0);
        break;
      case Ev::submit: {
        auto& job = jobs_[e.a];
        job.submitted = true;
        for (int i = 0; i < job.spec.tasks; ++i) {
          Task t;
          t.job = e.a;
          t.index = i;
          t.work = task_work(c_, e.a, i, job.spec);
          tasks_.push_back(t);
          job.queue.push_back(new_request(static_cast<int>(tasks_.size() - 1), Purpose::primary, {}));
        }
        job.open = job.spec.tasks;
        for (int d = 0; d < static_cast<int>(devices_.size()); ++d)
          if (devices_[d].present && devices_[d].attempt < 0) poll_soon(d, unit(mix(c_.seed, 0x5b, d, e.a)));
        break;
      }
    }
  }
  return collect();
}

}  // namespace detail

Metrics simulate(const WorldConfig& config, Policy& policy) {
  detail::Sim sim(config, policy);
  return sim.run();
}

}  // namespace poolsim
