#include "sim_state.hpp"

#include "pool/scheduling/quorum.hpp"

#include <algorithm>
#include <utility>

namespace poolsim::detail {

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

int Sim::new_request(int t, Purpose p, std::vector<int> producers, bool rerun) {
  auto& task = tasks_[t];
  auto& job = jobs_[task.job];
  Request q;
  q.task = t;
  q.job = task.job;
  q.purpose = p;
  q.producers = std::move(producers);
  q.work = task.work;
  int seq = task.seq++;
  q.id = job.spec.id + ":" + std::to_string(task.index) +
         (rerun ? "/r" + std::to_string(seq) : p == Purpose::primary ? "" : "/v" + std::to_string(seq));
  q.key = mix(c_.seed, 0x4e9, static_cast<std::uint64_t>(task.job) * 1000003ULL + task.index,
              p == Purpose::primary && !rerun ? 0 : seq + 1);
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
    if (check_by_computation(r, attempt)) return;
    // The batch job asks for a spot check of a share of its results (--spot-check).
    const auto& job = jobs_[tasks_[ti].job];
    const bool spot = job.spec.workload == kExec && c_.exec_spot_check > 0 &&
                      unit(mix(c_.seed, 0x5c07, static_cast<std::uint64_t>(attempt))) < c_.exec_spot_check;
    if (trust_.replicate(devices_[device].spec.id) || spot) {
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

bool Sim::check_by_computation(int r, int attempt) {
  const int ti = requests_[r].task;
  const Workload w = jobs_[tasks_[ti].job].spec.workload;
  if (!(w == kRender && c_.render_checks) && !(w == kMatmul && c_.matmul_checks)) return false;
  auto& a = attempts_[attempt];
  a.check_s = (a.stop - a.start) * (w == kRender ? c_.render_check_cost : c_.matmul_check_cost);
  const double catch_p = w == kRender ? c_.render_catch : c_.matmul_catch;
  const int device = a.device;
  const std::uint64_t value = a.value;
  auto& res = tasks_[ti].results.back();
  if (value != 0 && unit(mix(c_.seed, 0xc4ec, static_cast<std::uint64_t>(attempt))) < catch_p) {
    // Caught: never accepted nor paid, a failed check for its device, and the task runs again.
    judge(device, &tasks_[ti].results.back(), Verdict::invalid);
    auto& job = jobs_[tasks_[ti].job];
    if (!job.done) job.queue.push_front(new_request(ti, Purpose::primary, {}, true));
    return true;
  }
  judge(device, &res, Verdict::valid);  // a check passed (wrongly, for a wrong result that slipped through)
  accept(ti, value);
  return true;
}

void Sim::resolve(int ti) {
  auto& t = tasks_[ti];
  auto rs = t.results;  // judging may exclude devices and touch tasks_, keep a copy of what to judge
  auto q = sch::quorum(rs.size(), 2, [&](std::size_t i, std::size_t j) { return rs[i].value == rs[j].value; });
  bool wants_vouched = false;
  if (q.decided) {
    // Independent parties only, as the coordinator counts them: one network
    // counts once (replicas are placed on other networks, so this holds
    // unless a copy was adopted from the same one).
    std::vector<int> nets = {devices_[rs[q.winner].device].network};
    for (std::size_t i : q.agreeing) nets.push_back(devices_[rs[i].device].network);
    std::sort(nets.begin(), nets.end());
    if (std::unique(nets.begin(), nets.end()) - nets.begin() < 2) q.decided = false;
    // ... and one of them vouched for: two new identities never decide.
    if (q.decided && c_.vouched_quorums && !vouched(rs[q.winner].device) &&
        std::none_of(q.agreeing.begin(), q.agreeing.end(), [&](std::size_t i) { return vouched(rs[i].device); })) {
      q.decided = false;
      wants_vouched = true;
      // Bounded, as the coordinator's extra copies are: past them the value a
      // vouched-for party holds is kept, else the winner's.
      if (rs.size() >= kMaxResultsPerTask) {
        std::uint64_t value = rs[q.winner].value;
        for (const auto& r : rs)
          if (vouched(r.device)) value = r.value;
        accept(ti, value);
        return;
      }
    }
  }
  if (!q.decided) {
    std::vector<int> producers;
    for (const auto& r : rs) producers.push_back(r.device);
    tasks_[ti].open += 1;
    int req = new_request(ti, Purpose::tiebreak, std::move(producers));
    requests_[req].needs_vouched = wants_vouched;  // the coordinator's copy for a vouched-for device
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

bool Sim::vouched(int device) const {
  const auto& dev = devices_[device];
  return dev.spec.history > 0 || dev.valid_checks >= kVouchChecks;
}

void Sim::judge(int device, Result* result, Verdict v) {
  if (v == Verdict::valid) devices_[device].valid_checks += 1;
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

}  // namespace poolsim::detail
