#include "pool/worker_ops.hpp"

#include "fs/safe_fs.hpp"

#include "core/json_fields.hpp"
#include "pool/scheduling/network.hpp"
#include "pool/wire.hpp"
#include "pool/workloads/train_round.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace runsnack::pool {

using json = nlohmann::json;

json refusal(const std::string& why) { return {{"ok", false}, {"error", why}}; }

std::string format_price(double credits_per_hour) {
  return format_credits(static_cast<Micro>(std::llround(credits_per_hour * static_cast<double>(kMicroPerCredit))));
}

namespace {

json refuse(const Error& e) { return refusal(e.what()); }

json task_json(const LeasedTask& t) {
  return {{"id", t.id},         {"job", t.job}, {"shard", t.shard}, {"shards", t.shards}, {"attempt", t.attempt},
          {"workload", t.workload}, {"spec", t.spec}};
}

std::uint64_t draw(std::mt19937_64& seeds) { return seeds(); }

}  // namespace

WorkerOps::WorkerOps(PoolStore& store, std::function<void(const json&)> on_event, std::uint64_t seed)
    : store_(store), on_event_(std::move(on_event)), challenge_rng_(seed),
      known_answers_(draw(challenge_rng_)), replication_(store, on_event_, draw(challenge_rng_), known_answers_) {}

json WorkerOps::handle(WorkerSession& s, const Moment& now, const json& req) {
  const std::string op = string_or(req, "op");
  if (op == "heartbeat" || now.steady - s.last_renewal >= kRenewEvery) {
    s.last_renewal = now.steady;
    if (auto hb = store_.heartbeat(s.peer, now.wall_ms()); !hb) spdlog::warn("pool: heartbeat: {}", hb.error().what());
  }
  if (op == "register") return register_worker(s, now, req);
  if (op == "calibrated") return calibrated(s, now, req);
  if (s.device.empty()) return refusal("register first");
  if (op == "heartbeat") return heartbeat(s, req);
  if (op == "claim") return claim(s, now, req);
  if (op == "results") return results(s, now, req);
  if (op == "input") return input(s, req);
  if (op == "input_part") return input_part(s, req);
  if (op == "failed") return failed(s, now, req);
  if (op == "abandon") return abandon(s, now, req);
  if (op == "result") return result(s, now, req);
  return refusal("unknown op '" + op.substr(0, 40) + "'");
}

json WorkerOps::register_worker(WorkerSession& s, const Moment& now, const json& req) {
  if (!req.contains("public_key") || !req["public_key"].is_string()) return refusal("register without public_key");
  auto raw = hex_decode(req["public_key"].get<std::string>());
  if (!raw || raw->size() != 32) return refusal("bad public_key");
  std::array<std::uint8_t, 32> key{};
  std::copy(raw->begin(), raw->end(), key.begin());
  if (PeerId::from_raw_public_key(key) != s.consumer) return refusal("public_key is not the session's key");
  s.public_key = *raw;
  const json d = field_or(req, "device");
  if (!d.is_object()) return refusal("bad device");
  std::string kind = string_or(d, "kind", "cpu"), name = string_or(d, "name", "cpu");
  double hint = number_or(d, "score", 0.0), price = number_or(d, "price", 0.0);
  // Kinds: native cpu/gpu, and a browser tab's webgpu or wasm (docs/BROWSER-WORKERS.md).
  const bool known_kind = kind == "cpu" || kind == "gpu" || kind == "webgpu" || kind == "wasm";
  if (!known_kind || name.size() > 200 || !(hint >= 0 && hint < 1e15) ||
      !(price >= 0 && price < 1e9))
    return refusal("bad device");
  auto runs = parse_device_runs(kind, d);
  if (!runs) return refusal("bad device: " + runs.error().message);
  auto cap = parse_max_task_seconds(d);
  if (!cap) return refusal("bad device: " + cap.error().message);
  if (const double most = store_.policy().max_price; most > 0 && price > most)
    return refusal("this pool pays at most " + format_price(most) + " credits per device-hour: join with --price " +
                   format_price(most) + " or less");
  const std::string network = scheduling::network_of(s.address);
  auto id = store_.register_device(s.peer, kind, name, price, now.wall_ms(), *cap, network);
  if (!id) return refuse(id.error());
  if (!s.device.empty() && s.device != *id) calibrations_.erase(s.device);
  s.device = *id;
  s.runs = std::move(*runs);
  s.max_task_seconds = *cap;
  networks_[s.device] = network;
  replication_.worker_network(s.peer, network);
  known_answers_.forget_peer(s.peer);  // a known-answer task it held before is void
  // Leases this worker holds but does not know of (a coordinator that died
  // between granting a claim and answering it) would otherwise be renewed
  // by its heartbeats forever: requeue all but the ones it has results for.
  // The ones it keeps keep the terms they were leased at.
  std::vector<std::string> holding;
  if (req.contains("holding") && req["holding"].is_array())
    for (const auto& t : req["holding"])
      if (t.is_string() && holding.size() < 10000) holding.push_back(t.get<std::string>());
  auto stale = store_.release_stale_leases(s.peer, holding);
  if (!stale) return refuse(stale.error());
  if (*stale > 0) on_event_({{"event", "stale_leases_released"}, {"peer", s.peer}, {"count", *stale}});
  // Its score is what we measure (pool/calibration.hpp): no claims before the answer.
  auto challenge = make_challenge(hint, challenge_rng_());
  calibrations_[s.device] = {challenge, hint, price, now.steady};
  return {{"ok", true}, {"device", s.device}, {"lease_ms", store_.policy().lease_ms},
          {"calibrate", {{"seed", challenge.seed}, {"iterations", challenge.iterations}}}};
}

json WorkerOps::calibrated(WorkerSession& s, const Moment& now, const json& req) {
  auto c = calibrations_.find(s.device);
  if (c == calibrations_.end()) return refusal("no calibration was asked of this device");
  const auto pending = c->second;
  calibrations_.erase(c);
  const double seconds = std::chrono::duration<double>(now.steady - pending.issued).count();
  std::vector<std::string> answer;
  if (req.contains("checkpoints") && req["checkpoints"].is_array() &&
      req["checkpoints"].size() == static_cast<std::size_t>(kCalibrationSegments))
    for (const auto& v : req["checkpoints"]) answer.push_back(v.is_string() ? v.get<std::string>() : "");
  std::uniform_int_distribution<int> pick(0, kCalibrationSegments - 1);
  const int a = pick(challenge_rng_), b = (a + 1 + pick(challenge_rng_) % (kCalibrationSegments - 1)) % kCalibrationSegments;
  if (!check_answer(pending.challenge, answer, a, b)) {
    if (s.audit) s.audit("pool_calibration", "refuse", "wrong calibration answer", {{"device", s.device}});
    return refusal("the calibration answer is wrong");
  }
  const double score = measured_score(pending.challenge, seconds, pending.hint);
  if (auto r = store_.set_device_score(s.device, score); !r) return refuse(r.error());
  if (learned_)
    learned_->device_joined({s.device, s.peer, networks_[s.device], std::max(score, 1.0), pending.price}, now.steady_s());
  on_event_({{"event", "device_registered"}, {"device", s.device}, {"score", score}, {"hint", pending.hint},
             {"price", pending.price}, {"network", networks_[s.device]}});
  return {{"ok", true}, {"score", score}};
}

json WorkerOps::heartbeat(const WorkerSession& s, const json& req) {
  if (!req.contains("task")) return {{"ok", true}};
  if (!req["task"].is_string() || !req.contains("attempt") || !req["attempt"].is_number_integer())
    return refusal("a heartbeat's task is a task id with its attempt");
  auto lost = store_.lease_lost(req["task"].get<std::string>(), req["attempt"].get<std::int64_t>(), s.peer);
  if (!lost) return refuse(lost.error());
  if (!*lost) return {{"ok", true}};
  return {{"ok", true}, {"stop", true}, {"why", valid_utf8((*lost)->substr(0, 300))}};
}

json WorkerOps::claim(WorkerSession& s, const Moment& now, const json& req) {
  const std::string& device = s.device;
  const std::string& peer = s.peer;
  if (calibrations_.count(device)) return refusal("answer the calibration first");
  if (auto excluded = store_.exclusion(device); excluded && *excluded)
    return refusal("this device is excluded from the pool: " + **excluded);
  if (auto kat = known_answer_claim(s)) return *kat;
  // No more leases than the device's record allows (pool/scheduler.hpp
  // lease_cap), and for a device without one, than its network's fresh devices share.
  auto room = lease_room(s);
  if (!room) return refuse(room.error());
  if (*room <= 0) return {{"ok", true}, {"tasks", json::array()}, {"retry_ms", 500}};
  std::optional<std::string> from_job;
  auto preference = scheduling::Preference::balanced;
  if (learned_) {
    auto choice = learned_choice(s, now);
    if (auto* wait = std::get_if<json>(&choice)) return *wait;
    from_job = std::get<LearnedChoice>(choice).job;
    preference = std::get<LearnedChoice>(choice).preference;
  } else if (abandoned_.count(device)) {
    // The store would serve the oldest job first: the oldest this device did not hand a task back from.
    auto rows = store_.pending_jobs(64, 100'000, peer, device, s.runs.sql_list());
    if (!rows) return refuse(rows.error());
    for (const auto& r : *rows)
      if (may_take(s, r.id, r.workload)) {
        from_job = r.id;
        break;
      }
    if (!from_job) return {{"ok", true}, {"tasks", json::array()}, {"retry_ms", 200}};
  }
  auto pending = store_.pending_count(static_cast<std::int64_t>(waiting_.size()) + 1);
  if (!pending) return refuse(pending.error());
  auto& me = waiting_[device];
  if (me.id.empty()) {
    me.id = device;
    me.since = now.wall;
    if (auto score = store_.device_score(device)) me.score = *score;
  }
  // Forget devices that stopped asking (they are busy or gone).
  const auto cutoff = now.wall - std::chrono::seconds(2);
  std::vector<WaitingDevice> waiting;
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.since < cutoff && it->first != device) it = waiting_.erase(it);
    else if (it->first != device && found_nothing_.count(it->first) && found_nothing_[it->first] > cutoff) ++it;
    else waiting.push_back((it++)->second);
  }
  if (!learned_ && !may_claim(device, waiting, static_cast<std::size_t>(*pending)))
    return {{"ok", true}, {"task", nullptr}, {"retry_ms", 200}};
  // Up to `max` tasks in one transaction (workers ask for several when
  // their tasks are short).
  std::int64_t max = req.contains("max") && req["max"].is_number_integer() ? req["max"].get<std::int64_t>() : 1;
  max = std::clamp<std::int64_t>(max, 1, std::min(kMaxClaimBatch, *room));
  if (max > 1) {  // never more than a fair share of what is pending
    const std::int64_t online = std::max<std::int64_t>(workers_online_, 1);
    auto pending_now = store_.pending_count(kMaxClaimBatch * online);
    if (!pending_now) return refuse(pending_now.error());
    max = std::clamp<std::int64_t>(*pending_now / online, 1, max);
  }
  json tasks = json::array();
  auto leased = store_.claim_many(device, peer, now.wall_ms(), max, from_job, s.runs.sql_list(), s.training_shard);
  if (!leased) return refuse(leased.error());
  std::set<std::pair<std::string, std::int64_t>> shards_claimed;
  const auto free = free_networks(device, now);
  for (auto& t : *leased) {
    auto c = replication_.on_claimed(t, peer, now.wall_ms(), free);
    if (!c) return refuse(c.error());
    if (!*c) {  // a copy for a device on another network
      if (auto u = store_.unclaim(t.id, t.attempt); !u) return refuse(u.error());
      continue;
    }
    // Two copies of one shard in one claim (pool/replication.hpp: copies
    // run on different peers): the second goes back to the pending queue.
    if (!shards_claimed.insert({t.job, t.shard}).second) {
      if (auto u = store_.unclaim(t.id, t.attempt); !u) return refuse(u.error());
      continue;
    }
    if (learned_) learned_->task_started({t.id, device, t.job, t.workload, preference, 1}, now.steady_s());
    s.training_shard = t.workload == kTrainRoundWorkload ? std::optional<std::int64_t>(t.shard) : std::nullopt;
    job_progress_[t.job] = now.steady;
    tasks.push_back(task_json(t));
  }
  // A device that may claim but finds nothing it may run (every pending
  // task is a copy of a shard it already ran, pool/replication.hpp) must
  // not hold back the others for the next 2 s.
  if (tasks.empty()) {
    if (*pending > 0) found_nothing_[device] = now.wall;
    return {{"ok", true}, {"tasks", tasks}, {"retry_ms", 200}};
  }
  found_nothing_.erase(device);
  waiting_.erase(device);
  return {{"ok", true}, {"tasks", tasks}};
}

Result<std::int64_t> WorkerOps::lease_room(const WorkerSession& s) {
  auto standing = store_.lease_standing(s.device, s.peer);
  if (!standing) return standing.error();
  const PoolPolicy& policy = store_.policy();
  // Results held for a quorum are work done: their leases wait for the other
  // copies, which may need this very device's room (else two capped devices
  // holding each other's copies would wait for ever).
  const std::int64_t running = standing->held - replication_.held_results(s.peer);
  std::int64_t room = lease_cap(standing->record, policy.first_leases) - running;
  if (standing->record.completed == 0) {
    auto n = networks_.find(s.device);
    const std::string network = n == networks_.end() ? scheduling::kUnknownNetwork : n->second;
    auto fresh = store_.fresh_leases(network);
    if (!fresh) return fresh.error();
    // Held results again take no room (of anyone's on the network: a slight over-count of the room).
    room = std::min(room, policy.fresh_leases_per_network - (*fresh - replication_.held_results_on_network(network)));
  }
  return room;
}

json WorkerOps::results(WorkerSession& s, const Moment& now, const json& req) {
  // Several results (or failures) in one message and one transaction.
  if (!req.contains("results") || !req["results"].is_array() || req["results"].size() > kMaxClaimBatch)
    return refusal("results must be a list of at most " + std::to_string(kMaxClaimBatch));
  auto batch = store_.batch(Transaction::Lock::exclusive);
  if (!batch) return refuse(batch.error());
  json answers = json::array();
  // Results that passed their checks are completed together after the loop
  // (their answers are null until then): one set of statements, not one per result.
  std::vector<DeferredResult> deferred;
  for (const auto& one : req["results"]) {
    const std::string inner = string_or(one, "op");
    answers.push_back(inner == "result"   ? result(s, now, one, &deferred)
                      : inner == "failed" ? failed(s, now, one)
                                          : refusal("a batch holds results and failures only"));
  }
  if (!deferred.empty()) {
    std::vector<Completion> completions;
    for (const auto& d : deferred) completions.push_back({d.task, d.attempt, &d.result});
    auto outcomes = store_.complete_many(s.peer, completions, now.wall_ms());
    std::size_t k = 0;
    for (auto& answer : answers) {
      if (!answer.is_null()) continue;
      answer = outcomes ? completed(deferred[k].task, s.peer, deferred[k].result, (*outcomes)[k]) : refuse(outcomes.error());
      ++k;
    }
  }
  if (auto c = batch->commit(); !c) return refuse(c.error());
  return {{"ok", true}, {"answers", answers}};
}

json WorkerOps::failed(WorkerSession& s, const Moment& now, const json& req) {
  const std::string task = string_or(req, "task");
  const std::int64_t attempt = int_or(req, "attempt", -1);
  if (task.empty()) return refusal("failed without its task id");
  if (known_answers_.take(s.peer, task, attempt)) return {{"ok", true}};  // no verdict: it may try another
  std::string reason = string_or(req, "reason", "failed");
  if (reason.size() > 1000) reason.resize(1000);
  learned_finished(task, s.device, scheduling::Outcome::failed, now);
  auto r = store_.fail_attempt(task, attempt, s.peer, "worker: " + reason, now.wall_ms());
  if (!r) return refuse(r.error());
  on_event_({{"event", "task_failed"}, {"task", task}, {"peer", s.peer}, {"reason", reason}});
  return {{"ok", true}};
}

json WorkerOps::abandon(WorkerSession& s, const Moment& now, const json& req) {
  const std::string task = string_or(req, "task");
  const std::int64_t attempt = int_or(req, "attempt", -1);
  if (task.empty()) return refusal("abandon without its task id");
  if (!s.max_task_seconds) return refusal("only a device that stated device.max_task_seconds may abandon a task");
  if (known_answers_.take(s.peer, task, attempt)) return {{"ok", true}};  // no verdict, as for failed
  if (auto a = abandoned_.find(s.device); a != abandoned_.end() && a->second.size() >= kMaxAbandonedJobs)
    return refusal("this device abandoned tasks of too many jobs: report this one as failed");
  // Only past the cap, counted from the lease: a device may not shop for jobs by handing tasks back unrun.
  auto job = store_.abandon(task, attempt, s.peer, now.wall_ms() - *s.max_task_seconds * 1000);
  if (!job) return refuse(job.error());
  if (!*job) return refusal("no lease of this task attempt held past this device's max_task_seconds");
  abandoned_[s.device].insert(**job);
  learned_finished(task, s.device, scheduling::Outcome::cancelled, now);
  on_event_({{"event", "task_abandoned"}, {"task", task}, {"job", **job}, {"device", s.device}, {"peer", s.peer},
             {"max_task_seconds", *s.max_task_seconds}});
  return {{"ok", true}};
}

bool WorkerOps::may_take(const WorkerSession& s, const std::string& job, const std::string& workload) const {
  if (auto a = abandoned_.find(s.device); a != abandoned_.end() && a->second.count(job)) return false;
  if (!s.max_task_seconds || !learned_) return true;
  // Task time = a task's work over the device's speed: learned for this
  // device when it ran the workload, else from its calibration score and the
  // workload's pool-wide unit. Before any device ran the workload the unit
  // is a guess: offer it (abandon catches a task that overruns).
  auto e = learned_->estimate(s.device, workload, 1);
  if (!e || e->workload_observations == 0) return true;
  return e->task_s <= static_cast<double>(*s.max_task_seconds);
}

int WorkerOps::worker_left(WorkerSession& s, const Moment& now) {
  --workers_online_;
  if (!s.device.empty()) {
    waiting_.erase(s.device), found_nothing_.erase(s.device);
    if (learned_) learned_->device_left(s.device, now.steady_s());
    calibrations_.erase(s.device);
    networks_.erase(s.device);
  }
  known_answers_.forget_peer(s.peer);
  replication_.worker_left(s.peer);
  auto released = store_.release_worker(s.peer);
  if (!released) spdlog::warn("pool: releasing {}'s leases: {}", s.peer, released.error().what());
  return released ? *released : 0;
}

std::optional<json> WorkerOps::known_answer_claim(const WorkerSession& s) {
  const std::string& device = s.device;
  const std::string& peer = s.peer;
  const auto may_run = [&](const LeasedTask& t) { return s.runs.allows(t.needs); };
  // One at a time, and no other work meanwhile: an unproven device shows
  // what its results are worth before they count in a job.
  if (known_answers_.outstanding(device)) return json{{"ok", true}, {"tasks", json::array()}, {"retry_ms", 200}};
  if (known_answers_.known() == 0) return std::nullopt;
  std::optional<LeasedTask> t;
  bool tiebreak = false;
  if (!proven_.count(device)) {
    auto valid = store_.valid_results(device);
    if (!valid) return refuse(valid.error());
    auto trusted = store_.peer_trusted(peer);  // the operator's word (`pool trust`) needs no test
    if (!trusted) return refuse(trusted.error());
    if (*valid > 0 || *trusted) proven_.insert(device);
    else t = known_answers_.issue(device, peer, may_run);
  }
  // A disputed known answer goes to a device with a proven record,
  // independent of the answer's producers and of the disputer, before
  // anyone is judged by it.
  if (!t && proven_.count(device) && known_answers_.open_disputes() > 0) {
    auto vouched = store_.vouched_for(peer, kProvenChecks);
    if (!vouched) return refuse(vouched.error());
    if (*vouched) t = known_answers_.issue_tiebreak(device, peer, networks_[device], may_run), tiebreak = true;
  }
  if (!t) return std::nullopt;
  on_event_({{"event", tiebreak ? "known_answer_tiebreak_issued" : "known_answer_issued"}, {"device", device},
             {"peer", peer}, {"task", t->id}, {"attempt", t->attempt}});
  return json{{"ok", true}, {"tasks", json::array({task_json(*t)})}};
}

std::vector<std::string> WorkerOps::free_networks(const std::string& device, const Moment& now) const {
  const auto cutoff = now.wall - std::chrono::seconds(2);
  std::vector<std::string> out;
  for (const auto& [id, w] : waiting_) {
    // Not one that found nothing it may run (e.g. it ran the shard already).
    auto nothing = found_nothing_.find(id);
    if (id == device || w.since < cutoff || (nothing != found_nothing_.end() && nothing->second >= cutoff)) continue;
    if (auto n = networks_.find(id); n != networks_.end()) out.push_back(n->second);
  }
  return out;
}

std::optional<std::string> WorkerOps::network_of_device(const std::string& device) const {
  auto it = networks_.find(device);
  if (it == networks_.end()) return std::nullopt;
  return it->second;
}

void WorkerOps::use_learned_scheduler(const Moment& now) {
  // What it learned before a restart: device speeds and reliabilities.
  if (auto saved = store_.scheduler_state(); saved && *saved) {
    if (auto loaded = scheduling::Scheduler::load(**saved)) {
      learned_.emplace(std::move(*loaded));
      learned_->forget_sessions(now.steady_s());
      return;
    }
    spdlog::warn("pool: the saved scheduler state does not load; starting afresh");
  }
  learned_.emplace();
}

json WorkerOps::learned_estimates(const std::string& device) const {
  json out = json::object();
  if (!learned_) return out;
  for (const char* workload : {"exec", "matmul", "render", "noop"})
    if (auto e = learned_->estimate(device, workload, 1); e && e->observations > 0)
      out[workload] = {{"task_seconds", e->task_s}, {"observations", e->observations}, {"success", e->success}};
  return out;
}

void WorkerOps::save_learned() {
  if (!learned_) return;
  if (auto r = store_.save_scheduler_state(learned_->save()); !r) spdlog::warn("pool: {}", r.error().what());
}

std::variant<WorkerOps::LearnedChoice, json> WorkerOps::learned_choice(const WorkerSession& s, const Moment& now) {
  const std::string& device = s.device;
  // Only what this device may run: a job whose pending tasks are all copies
  // of shards its peer ran would otherwise keep it waiting for them.
  auto rows = store_.pending_jobs(64, 100'000, s.peer, device, s.runs.sql_list());
  if (!rows) return refuse(rows.error());
  std::vector<scheduling::PendingJob> jobs;
  for (const auto& r : *rows) {
    if (!may_take(s, r.id, r.workload)) continue;  // so a capped device never waits on a job it may not take
    scheduling::PendingJob j;
    j.id = r.id, j.workload = r.workload, j.pending = r.pending;
    if (r.info.is_object() && r.info.contains("prefer") && r.info["prefer"].is_string())
      j.preference = scheduling::parse_preference(r.info["prefer"].get<std::string>()).value_or(scheduling::Preference::balanced);
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) return json{{"ok", true}, {"tasks", json::array()}, {"retry_ms", 200}};
  for (const auto& j : jobs) job_progress_.emplace(j.id, now.steady);
  auto d = learned_->decide(device, jobs, now.steady_s());
  if (d.kind == scheduling::Decision::Kind::run)
    for (const auto& j : jobs)
      if (j.id == d.job) return LearnedChoice{j.id, j.preference};
  // The scheduler counts on better devices taking the pending work, but it
  // does not know which tasks a device may not run (quorum copies avoid the
  // peers of the shard's other copies): a job nobody leased from for a while
  // goes to whoever may run it, so that such a copy is never left waiting.
  for (const auto& j : jobs)
    if (now.steady - job_progress_[j.id] > kStarvedAfter) return LearnedChoice{j.id, j.preference};
  // A backup copy needs a second live lease of one task, which the store
  // does not hold yet: wait instead.
  auto retry = static_cast<std::int64_t>(std::clamp(d.retry_after_s, 0.2, 5.0) * 1000);
  return json{{"ok", true}, {"tasks", json::array()}, {"retry_ms", retry}};
}

void WorkerOps::learned_finished(const std::string& task, const std::string& device, scheduling::Outcome outcome,
                                 const Moment& now) {
  if (learned_) learned_->task_finished({task, device, outcome, -1}, now.steady_s());
}

}  // namespace runsnack::pool
