#include "sim.hpp"

#include "pool/scheduling/quorum.hpp"
#include "pool/scheduling/trust_policy.hpp"

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <deque>
#include <queue>
#include <unordered_map>
#include <vector>

namespace poolsim {
namespace {

using sch::Decision;
using sch::Outcome;
using sch::PendingJob;
using sch::Verdict;

enum class Purpose : std::uint8_t { primary, replica, tiebreak, audit, known_answer };
enum class Fate : std::uint8_t { running, result, failed, lost, cancelled };

constexpr double kTimeLimit = 30 * 86400.0;  // a batch not done in 30 simulated days is reported unfinished

struct Device {
  DeviceSpec spec;
  int slot = 0, identity = 0;
  bool present = false;   // online and working
  bool known = false;     // the coordinator believes it online (until it notices a departure)
  bool excluded = false;
  int attempt = -1;       // the run it is doing (or lost, until noticed)
  std::uint32_t poll_token = 0, epoch = 0;
  int session = 0;
  double since = 0;
  std::vector<std::pair<double, double>> online;  // (from, to)
  std::vector<int> unchecked;                     // tasks accepted from it without a check
  int known_answers = 0;
  int peer = 0, network = 0;  // interned spec.peer / spec.network
};

struct Request {
  int task = -1;          // none for known-answer tasks
  int job = 0;
  Purpose purpose = Purpose::primary;
  std::string id;         // what the policy sees
  std::uint64_t key = 0;  // random stream of its runs
  std::vector<int> producers;
  std::vector<int> attempts;  // running copies
  int runs = 0;
  bool done = false;
  double work = 0;
};

struct Result {
  int device = 0, attempt = 0;
  std::uint64_t value = 0;  // 0 is the right answer
  enum class Judged : std::uint8_t { no, unchecked, valid, invalid } judged = Judged::no;
};

struct Task {
  int job = 0, index = 0;
  double work = 0;
  std::vector<Result> results;
  bool accepted = false, final = false;
  std::uint64_t value = 0;
  int open = 0;  // verification runs outstanding
  int seq = 0;   // verification requests made
};

struct Job {
  JobSpec spec;
  std::string verify_id;
  std::deque<int> queue;    // pending primary requests
  std::vector<int> verify;  // pending verification requests
  int open = 0;
  bool submitted = false, done = false;
  double done_at = 0;
};

struct Attempt {
  int request = 0, device = 0;
  double start = 0, end = 0, stop = 0, price = 0;
  bool fails = false, valid = false, backup = false;
  std::uint64_t value = 0;
  Purpose purpose = Purpose::primary;
  Fate fate = Fate::running;
  bool first_result = false;
};

enum class Ev : std::uint8_t { poll, end, leave, join, detect, submit, trace };
struct Event {
  double t;
  std::uint64_t seq;
  Ev type;
  int a;
  std::uint32_t b;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

double exp_draw(std::uint64_t key, double mean) { return -mean * std::log(1.0 - unit(key)); }
double normal_draw(std::uint64_t key) {
  double u1 = 1.0 - unit(key), u2 = unit(key ^ 0x9e37ULL);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

class Sim {
 public:
  Sim(const WorldConfig& c, Policy& p) : c_(c), policy_(p), trust_(sch::TrustConfig{}, mix(c.seed, 0x7a57)) {}
  Metrics run();

 private:
  void push(double t, Ev type, int a, std::uint32_t b = 0) { events_.push({t, seq_++, type, a, b}); }
  void poll_soon(int d, double delay);
  void join(int slot, int identity);
  void leave(int slot, int identity);
  void notice_departure(int d);
  void exclude(int d);
  void poll(int d);
  void start(int d, int request, bool backup);
  void end(int attempt);
  void stop_copy(int attempt, Fate fate, Outcome told);
  void requeue(int request);
  void adopt(int attempt, int replica);
  void deliver(int request, int attempt);
  void resolve(int task);
  void judge(int device, Result* result, Verdict v);
  void accept(int task, std::uint64_t value);
  int new_request(int task, Purpose p, std::vector<int> producers);
  bool eligible(int d, const Request& r) const;
  Metrics collect();
  void trace();

  WorldConfig c_;
  Policy& policy_;
  sch::TrustPolicy trust_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  double now_ = 0;
  std::vector<Device> devices_;
  std::vector<int> slot_device_;  // current identity's device per slot
  std::unordered_map<std::string, int> peers_, networks_;
  std::vector<Request> requests_;
  std::unordered_map<std::string, int> request_by_id_;
  std::unordered_map<int, int> open_replica_of_;  // primary request -> the replica its result just asked for
  std::vector<Task> tasks_;
  std::vector<Job> jobs_;
  std::unordered_map<std::string, int> job_by_entry_;  // "id" and "id#verify" -> job
  std::vector<Attempt> attempts_;
  std::vector<PendingJob> pending_;  // scratch
  std::vector<float> decide_us_;
  std::int64_t cheaters_excluded_ = 0, honest_excluded_ = 0;
};

void Sim::poll_soon(int d, double delay) {
  auto& dev = devices_[d];
  dev.poll_token += 1;
  push(now_ + delay, Ev::poll, d, dev.poll_token);
}

void Sim::join(int slot, int identity) {
  int d = slot_device_[slot];
  if (d < 0 || devices_[d].identity != identity) {
    Device dev;
    dev.spec = device_spec(c_, slot, identity);
    dev.slot = slot;
    dev.identity = identity;
    dev.peer = peers_.try_emplace(dev.spec.peer, static_cast<int>(peers_.size())).first->second;
    dev.network = networks_.try_emplace(dev.spec.network, static_cast<int>(networks_.size())).first->second;
    d = static_cast<int>(devices_.size());
    devices_.push_back(std::move(dev));
    slot_device_[slot] = d;
    // A record from before the simulation (honest: a turned cheater behaved until now).
    auto& fresh = devices_[d];
    trust_.device_seen(fresh.spec.id, {fresh.spec.peer, fresh.spec.network});
    for (int i = 0; i < fresh.spec.history; ++i) {
      if (trust_.known_answer_now(fresh.spec.id)) trust_.record(fresh.spec.id, Verdict::valid);
      trust_.record(fresh.spec.id, trust_.replicate(fresh.spec.id) ? Verdict::valid : Verdict::unchecked);
    }
  }
  auto& dev = devices_[d];
  if (dev.excluded) {  // gone for good: its slot gets a new device later
    push(now_ + exp_draw(mix(c_.seed, 0x4e9, slot, identity), c_.replace_s), Ev::join, slot, identity + 1);
    return;
  }
  if (dev.known) notice_departure(d);  // back before its departure was noticed
  dev.present = true;
  dev.known = true;
  dev.since = now_;
  policy_.device_joined({dev.spec.id, dev.spec.peer, dev.spec.network, dev.spec.score, dev.spec.price_per_hour}, now_);
  policy_.verification(dev.spec.id, trust_.replica_probability(dev.spec.id));
  double session = exp_draw(mix(c_.seed, 0x5e55, slot * 1000003ULL + identity, dev.session++), dev.spec.session_s);
  push(now_ + session, Ev::leave, slot, static_cast<std::uint32_t>(identity));
  poll_soon(d, unit(mix(c_.seed, 0x9011, d, dev.session)));
}

void Sim::leave(int slot, int identity) {
  int d = slot_device_[slot];
  if (d < 0 || devices_[d].identity != identity) return;
  auto& dev = devices_[d];
  const std::uint64_t k = mix(c_.seed, 0x1ea7e, slot * 1000003ULL + identity, dev.session);
  if (dev.excluded) {
    push(now_ + exp_draw(k ^ 1, c_.replace_s), Ev::join, slot, identity + 1);
    return;
  }
  if (!dev.present) return;
  dev.present = false;
  dev.epoch += 1;
  dev.online.push_back({dev.since, now_});
  if (dev.attempt >= 0) {  // the run dies with the device; the coordinator notices later
    auto& a = attempts_[dev.attempt];
    a.stop = now_;
    a.fate = Fate::lost;
  }
  double notice = unit(k ^ 2) < c_.graceful_share ? 1.0 : c_.lease_s;
  push(now_ + notice, Ev::detect, d, dev.epoch);
  if (unit(k ^ 3) < c_.return_share)
    push(now_ + exp_draw(k ^ 4, c_.offline_s), Ev::join, slot, identity);
  else
    push(now_ + exp_draw(k ^ 5, c_.replace_s), Ev::join, slot, identity + 1);
}

void Sim::notice_departure(int d) {
  auto& dev = devices_[d];
  if (!dev.known) return;
  dev.known = false;
  policy_.device_left(dev.spec.id, now_);
  if (dev.attempt >= 0) {
    int a = dev.attempt;
    dev.attempt = -1;
    auto& q = requests_[attempts_[a].request];
    q.attempts.erase(std::find(q.attempts.begin(), q.attempts.end(), a));
    if (!q.done && q.attempts.empty()) requeue(attempts_[a].request);
  }
}

void Sim::exclude(int d) {
  auto& dev = devices_[d];
  dev.excluded = true;
  (dev.spec.cheater ? cheaters_excluded_ : honest_excluded_) += 1;
  if (dev.present) {
    dev.present = false;
    dev.epoch += 1;
    dev.online.push_back({dev.since, now_});
    if (dev.attempt >= 0) {
      attempts_[dev.attempt].stop = now_;
      attempts_[dev.attempt].fate = Fate::lost;
    }
  }
  notice_departure(d);
}

bool Sim::eligible(int d, const Request& r) const {
  // TrustPolicy::may_replicate_on's rule (another peer and another network), on interned ids.
  const auto& me = devices_[d];
  for (int p : r.producers) {
    const auto& o = devices_[p];
    if (p == d || o.peer == me.peer || o.network == me.network) return false;
  }
  return true;
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
  a.value = unit(k ^ 4) < wrong_p ? (mix(k, 0xbad) | 1) : 0;
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

void Sim::adopt(int id, int replica) {
  auto& a = attempts_[id];
  auto& primary = requests_[a.request];
  primary.attempts.erase(std::find(primary.attempts.begin(), primary.attempts.end(), id));
  const auto& dev = devices_[a.device];
  const auto& job = jobs_[primary.job];
  policy_.task_finished({primary.id, dev.spec.id, Outcome::cancelled, now_ - a.start}, now_);
  a.request = replica;
  a.purpose = Purpose::replica;
  a.backup = false;
  auto& q = requests_[replica];
  q.attempts.push_back(id);
  auto& verify = jobs_[q.job].verify;
  verify.erase(std::find(verify.begin(), verify.end(), replica));
  policy_.task_started({q.id, dev.spec.id, job.verify_id, workload_name(job.spec.workload),
                        *sch::parse_preference(job.spec.preference), job.spec.mean_work},
                       now_);
}

void Sim::requeue(int r) {
  auto& q = requests_[r];
  if (q.purpose == Purpose::known_answer) return;
  auto& job = jobs_[q.job];
  if (q.purpose == Purpose::primary) job.queue.push_front(r);
  else job.verify.push_back(r);
}

int Sim::new_request(int t, Purpose p, std::vector<int> producers) {
  auto& task = tasks_[t];
  auto& job = jobs_[task.job];
  Request q;
  q.task = t;
  q.job = task.job;
  q.purpose = p;
  q.producers = std::move(producers);
  q.work = task.work;
  int seq = task.seq++;
  q.id = job.spec.id + ":" + std::to_string(task.index) + (p == Purpose::primary ? "" : "/v" + std::to_string(seq));
  q.key = mix(c_.seed, 0x4e9, static_cast<std::uint64_t>(task.job) * 1000003ULL + task.index,
              p == Purpose::primary ? 0 : seq + 1);
  requests_.push_back(std::move(q));
  int id = static_cast<int>(requests_.size() - 1);
  request_by_id_[requests_.back().id] = id;
  return id;
}

void Sim::deliver(int r, int attempt) {
  // Judging can add requests (audits), so nothing here holds a reference into requests_.
  const Purpose purpose = requests_[r].purpose;
  const int ti = requests_[r].task;
  const int device = attempts_[attempt].device;
  const std::uint64_t value = attempts_[attempt].value;
  if (purpose == Purpose::known_answer) {
    attempts_[attempt].valid = value == 0;
    judge(device, nullptr, value == 0 ? Verdict::valid : Verdict::invalid);
    return;
  }
  tasks_[ti].results.push_back({device, attempt, value});
  if (purpose == Purpose::primary) {
    if (trust_.replicate(devices_[device].spec.id)) {
      tasks_[ti].open += 1;
      int req = new_request(ti, Purpose::replica, {device});
      jobs_[tasks_[ti].job].verify.push_back(req);
      open_replica_of_[r] = req;
    } else {
      judge(device, &tasks_[ti].results.back(), Verdict::unchecked);
      devices_[device].unchecked.push_back(ti);
      accept(ti, value);
    }
    return;
  }
  tasks_[ti].open -= 1;
  resolve(ti);
}

void Sim::resolve(int ti) {
  auto& t = tasks_[ti];
  auto rs = t.results;  // judging may exclude devices and touch tasks_, keep a copy of what to judge
  auto q = sch::quorum(rs.size(), 2, [&](std::size_t i, std::size_t j) { return rs[i].value == rs[j].value; });
  if (!q.decided) {
    std::vector<int> producers;
    for (const auto& r : rs) producers.push_back(r.device);
    tasks_[ti].open += 1;
    int req = new_request(ti, Purpose::tiebreak, std::move(producers));
    jobs_[tasks_[ti].job].verify.push_back(req);
    return;
  }
  std::uint64_t value = rs[q.winner].value;
  for (std::size_t i = 0; i < rs.size(); ++i) {
    auto& res = tasks_[ti].results[i];
    bool agrees = res.value == value;
    if (agrees && (res.judged == Result::Judged::no)) judge(res.device, &res, Verdict::valid);
    if (!agrees && res.judged != Result::Judged::invalid) judge(res.device, &tasks_[ti].results[i], Verdict::invalid);
  }
  accept(ti, value);
}

void Sim::judge(int device, Result* result, Verdict v) {
  if (result) {
    result->judged = v == Verdict::valid     ? Result::Judged::valid
                     : v == Verdict::invalid ? Result::Judged::invalid
                                             : Result::Judged::unchecked;
    if (v == Verdict::valid) attempts_[result->attempt].valid = true;
  }
  auto& dev = devices_[device];
  auto out = trust_.record(dev.spec.id, v);
  if (v == Verdict::invalid) policy_.verdict(dev.spec.id, false);
  if (dev.known) policy_.verification(dev.spec.id, trust_.replica_probability(dev.spec.id));
  if (out.audit) {
    // Its results accepted without a check are checked now (jobs still open).
    for (int ti : std::exchange(dev.unchecked, {})) {
      auto& t = tasks_[ti];
      auto& job = jobs_[t.job];
      if (job.done || !t.accepted) continue;
      t.open += 1;
      if (t.final) {
        t.final = false;
        job.open += 1;
      }
      job.verify.push_back(new_request(ti, Purpose::audit, {device}));
    }
  }
  if (out.excluded) exclude(device);
}

void Sim::accept(int ti, std::uint64_t value) {
  auto& t = tasks_[ti];
  t.accepted = true;
  t.value = value;
  if (t.open > 0 || t.final) return;
  t.final = true;
  auto& job = jobs_[t.job];
  if (--job.open == 0 && !job.done) {
    job.done = true;
    job.done_at = now_;
    job.verify.clear();
  }
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
    if (seen && dev.spec.cheater) m.cheaters += 1;
  }
  for (const auto& a : attempts_) {
    const auto& q = requests_[a.request];
    if (!jobs_[q.job].spec.measured) continue;
    double stop = a.fate == Fate::running ? now_ : a.stop;
    double busy = std::max(0.0, stop - a.start);
    m.total_s += busy;
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
    m.decide_max_us = *std::max_element(decide_us_.begin(), decide_us_.end());
  }
  return m;
}

}  // namespace

Metrics simulate(const WorldConfig& config, Policy& policy) {
  Sim sim(config, policy);
  return sim.run();
}

}  // namespace poolsim
