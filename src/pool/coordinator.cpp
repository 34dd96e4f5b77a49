#include "pool/coordinator.hpp"

#include "core/json_fields.hpp"
#include "crypto/identity.hpp"
#include "pool/result_message.hpp"
#include "pool/scheduling/network.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"
#include "session/session.hpp"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <random>
#include <set>

namespace runsnack::pool {

namespace asio = boost::asio;
using json = nlohmann::json;

namespace {

json refuse(const std::string& why) { return {{"ok", false}, {"error", why}}; }
json refuse(const Error& e) { return refuse(e.what()); }

std::string format_price(double credits_per_hour) {
  return format_credits(static_cast<Micro>(std::llround(credits_per_hour * static_cast<double>(kMicroPerCredit))));
}

// Handlers read a peer's JSON with accessors that do not throw; should one
// throw all the same (a bug of ours, not the peer's), the peer gets a refusal
// and its stream stays open, rather than the stream ending with no answer.
template <class Handler>
json answer_or_refuse(const char* what, Handler&& handle) {
  try {
    return handle();
  } catch (const json::exception& e) {
    spdlog::error("pool: {}: {}", what, e.what());
    return refuse("malformed message");
  }
}

json job_json(const JobStatus& j, const json& verification_method) {
  json out = {{"job", j.id},         {"owner", j.owner},     {"state", j.state},   {"reason", j.reason},
              {"workload", j.workload}, {"tasks", j.tasks},  {"pending", j.pending}, {"running", j.leased},
              {"done", j.done},      {"failed", j.failed},   {"budget", format_credits(j.budget)},
              {"credits_spent", format_credits(j.spent)}};
  if (j.info.is_object())
    for (const auto& [k, v] : j.info.items()) out[k] = v;
  json verification = verification_method.is_object() ? verification_method : json{{"method", "none"}};
  verification["checked"] = j.verified;
  verification["rejected"] = j.rejected;
  verification["verify_seconds"] = static_cast<double>(j.verify_us) / 1e6;
  verification["compute_seconds"] = static_cast<double>(j.compute_us) / 1e6;
  verification["cost_fraction"] = j.compute_us > 0 ? static_cast<double>(j.verify_us) / static_cast<double>(j.compute_us) : 0.0;
  if (verification.contains("copies"))  // replication: extra runs per task
    verification["cost_fraction"] = verification["copies"].get<double>() / static_cast<double>(std::max<std::int64_t>(j.tasks, 1));
  out["verification"] = verification;
  return out;
}

}  // namespace

Coordinator::Coordinator(asio::any_io_executor ex, PoolStore& store, std::function<void(const json&)> on_event)
    : ex_(ex), store_(store), on_event_(std::move(on_event)), maintenance_timer_(ex),
      stalls_(std::chrono::milliseconds(store.policy().give_up_ms)), known_answers_(std::random_device{}()), replication_(store, on_event_, std::random_device{}(), known_answers_) {}

std::int64_t Coordinator::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Coordinator::add_services(ServiceRouter& router) {
  router.add(kServiceWorker, {[this](std::shared_ptr<MuxStream> s, const json&, const ServiceContext& c) {
                                return serve_worker(std::move(s), c);
                              },
                              kServiceWorker, true});
  router.add(kServiceClient, {[this](std::shared_ptr<MuxStream> s, const json&, const ServiceContext& c) {
                                return serve_client(std::move(s), c);
                              },
                              kServiceClient, true});
}

void Coordinator::use_learned_scheduler() {
  // What it learned before a restart: device speeds and reliabilities.
  if (auto saved = store_.scheduler_state(); saved && *saved) {
    if (auto loaded = scheduling::Scheduler::load(**saved)) {
      learned_.emplace(std::move(*loaded));
      learned_->forget_sessions(now_s());
      return;
    }
    spdlog::warn("pool: the saved scheduler state does not load; starting afresh");
  }
  learned_.emplace();
}

json Coordinator::learned_estimates(const std::string& device) const {
  json out = json::object();
  if (!learned_) return out;
  for (const char* workload : {"exec", "matmul", "render", "noop"})
    if (auto e = learned_->estimate(device, workload, 1); e && e->observations > 0)
      out[workload] = {{"task_seconds", e->task_s}, {"observations", e->observations}, {"success", e->success}};
  return out;
}

void Coordinator::save_learned() {
  if (!learned_) return;
  if (auto r = store_.save_scheduler_state(learned_->save()); !r) spdlog::warn("pool: {}", r.error().what());
}

double Coordinator::now_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::variant<Coordinator::LearnedChoice, json> Coordinator::learned_choice(const std::string& device,
                                                                            const std::string& peer) {
  // Only what this device may run: a job whose pending tasks are all copies
  // of shards its peer ran would otherwise keep it waiting for them.
  auto rows = store_.pending_jobs(64, 100'000, peer, device);
  if (!rows) return refuse(rows.error());
  std::vector<scheduling::PendingJob> jobs;
  for (const auto& r : *rows) {
    scheduling::PendingJob j;
    j.id = r.id, j.workload = r.workload, j.pending = r.pending;
    if (r.info.is_object() && r.info.contains("prefer") && r.info["prefer"].is_string())
      j.preference = scheduling::parse_preference(r.info["prefer"].get<std::string>()).value_or(scheduling::Preference::balanced);
    jobs.push_back(std::move(j));
  }
  if (jobs.empty()) return json{{"ok", true}, {"tasks", json::array()}, {"retry_ms", 200}};
  const auto now = std::chrono::steady_clock::now();
  for (const auto& j : jobs) job_progress_.emplace(j.id, now);
  auto d = learned_->decide(device, jobs, now_s());
  if (d.kind == scheduling::Decision::Kind::run)
    for (const auto& j : jobs)
      if (j.id == d.job) return LearnedChoice{j.id, j.preference};
  // The scheduler counts on better devices taking the pending work, but it
  // does not know which tasks a device may not run (quorum copies avoid the
  // peers of the shard's other copies): a job nobody leased from for a while
  // goes to whoever may run it, so that such a copy is never left waiting.
  for (const auto& j : jobs)
    if (now - job_progress_[j.id] > kStarvedAfter) return LearnedChoice{j.id, j.preference};
  // A backup copy needs a second live lease of one task, which the store
  // does not hold yet: wait instead.
  auto retry = static_cast<std::int64_t>(std::clamp(d.retry_after_s, 0.2, 5.0) * 1000);
  return json{{"ok", true}, {"tasks", json::array()}, {"retry_ms", retry}};
}

void Coordinator::learned_finished(const std::string& task, const std::string& device, scheduling::Outcome outcome) {
  if (learned_) learned_->task_finished({task, device, outcome, -1}, now_s());
}

void Coordinator::stop() {
  save_learned();
  stopping_ = true;
  maintenance_timer_.cancel();
}

asio::awaitable<void> Coordinator::run_maintenance() {
  while (!stopping_) {
    maintenance_timer_.expires_after(std::chrono::milliseconds(250));
    boost::system::error_code ec;
    co_await maintenance_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (stopping_) break;
    if (++ticks_ % 40 == 0) save_learned();  // every ~10 s
    auto n = store_.expire_leases(now_ms());
    if (!n) spdlog::warn("pool: lease expiry: {}", n.error().what());
    else if (*n > 0) on_event_({{"event", "leases_expired"}, {"count", *n}});
    replication_.tick(now_ms(), {});  // shards no independent device can check any more
    if (ticks_ % 4 == 0) give_up_stuck_jobs();  // every ~1 s
  }
}

void Coordinator::give_up_stuck_jobs() {
  auto online = store_.online_worker_peers();  // the workers that may still get work
  auto loads = store_.running_job_loads(1000);
  if (!online || !loads) {
    spdlog::warn("pool: stall watch: {}", (online ? loads.error() : online.error()).what());
    return;
  }
  const std::set<std::string>& peers = *online;
  std::vector<StallWatch::JobView> views;
  std::map<std::string, std::string> why;
  for (const auto& l : *loads) {
    StallWatch::JobView v{l.job, l.pending, l.leased, 1, static_cast<std::int64_t>(peers.size())};
    const auto held = replication_.held_tasks(l.job);
    // Only a job that looks stuck by its counts gets the closer look.
    if (l.pending > 0 && !peers.empty() && l.leased <= static_cast<std::int64_t>(held.size())) {
      auto bars = store_.job_bars(l.job, kStallScan);
      if (!bars) {
        spdlog::warn("pool: stall watch: {}", bars.error().what());
        return;
      }
      v.running = 0;
      for (const auto& t : bars->leased) v.running += held.count(t) ? 0 : 1;
      v.placeable = l.pending > static_cast<std::int64_t>(bars->pending.size()) ? 1 : 0;
      for (const auto& p : bars->pending)
        if (std::any_of(peers.begin(), peers.end(), [&](const std::string& peer) { return !p.barred.count(peer); }))
          ++v.placeable;
      if (StallWatch::stuck(v) && !bars->pending.empty()) {
        const auto& first = bars->pending.front();
        why[l.job] = "no online worker may run task " + first.task + " (each of the " + std::to_string(peers.size()) +
                     " online is barred from it" + (first.last_reason.empty() ? "" : ", last: " + first.last_reason) +
                     ") and nothing of the job still runs";
      }
    }
    views.push_back(std::move(v));
  }
  for (const auto& job : stalls_.step(views, now_ms())) {
    const auto seconds = std::to_string(stalls_.give_up_after().count() / 1000);
    const std::string reason = "cannot complete: " + why[job] + " for " + seconds +
                               " s; a quorum needs that many workers on different peers (and networks): add workers, "
                               "or submit with fewer --replicas";
    if (auto r = store_.give_up_job(job, reason, now_ms()); !r) {
      spdlog::warn("pool: giving up job {}: {}", job, r.error().what());
      continue;
    }
    replication_.forget_job(job);
    checkers_.erase(job), job_progress_.erase(job), specs_.erase(job);
    on_event_({{"event", "job_stuck"}, {"job", job}, {"reason", reason}});
  }
}

asio::awaitable<void> Coordinator::serve_worker(std::shared_ptr<MuxStream> stream, ServiceContext context) {
  const std::string peer = context.consumer.str();
  std::string device, public_key;
  asio::steady_timer idle(ex_);
  auto arm = [&] {
    idle.expires_after(kWorkerIdleTimeout);
    idle.async_wait([stream](const boost::system::error_code& ec) {
      if (!ec) stream->reset();
    });
  };
  arm();
  on_event_({{"event", "worker_connected"}, {"peer", peer}});
  ++workers_online_;
  std::string why;
  std::chrono::steady_clock::time_point last_renewal{};
  while (true) {
    auto req = co_await read_stream_message(*stream, kMaxPoolMessageBytes);
    if (!req) {
      why = req.error().what();
      break;
    }
    arm();
    // Any message renews the worker's leases; at most once a second, so a
    // busy worker's claims and results do not each cost a write.
    const auto now = std::chrono::steady_clock::now();
    const bool explicit_heartbeat = string_or(*req, "op") == "heartbeat";
    if (explicit_heartbeat || now - last_renewal >= std::chrono::seconds(1)) {
      last_renewal = now;
      if (auto hb = store_.heartbeat(peer, now_ms()); !hb) spdlog::warn("pool: heartbeat: {}", hb.error().what());
    }
    // Frames announced by the message follow it; a count that cannot be
    // read leaves the stream out of step, so it closes.
    auto announced = announced_frames(*req);
    if (!announced) {
      why = announced.error().what();
      break;
    }
    Frames frames;
    std::size_t budget = kMaxFrameBytes;
    bool cut = false;
    for (std::size_t i = 0; i < *announced && !cut; ++i) {
      std::array<std::uint8_t, kFrameHeaderBytes> header{};
      auto got = co_await stream->read_exact(asio::buffer(header));
      auto length = got ? frame_length(header, budget) : Result<std::uint32_t>(got.error());
      if (!length) {
        why = length.error().what(), cut = true;
        break;
      }
      budget -= *length;
      std::string bytes;  // allocated as it arrives: a frame may announce 12 MiB (MuxStream::read_growing)
      if (auto r = co_await stream->read_growing(*length, bytes); !r) {
        why = r.error().what(), cut = true;
        break;
      }
      frames.all.push_back(std::move(bytes));
    }
    if (cut) break;
    json answer = answer_or_refuse("worker message", [&] { return handle_worker(*req, context, device, public_key, frames); });
    auto w = co_await write_stream_message(*stream, answer);
    if (!w) {
      why = w.error().what();
      break;
    }
  }
  if (why.empty()) why = "stream closed";
  idle.cancel();
  --workers_online_;
  if (!device.empty()) waiting_.erase(device), found_nothing_.erase(device);
  if (learned_ && !device.empty()) learned_->device_left(device, now_s());
  if (!device.empty()) calibrations_.erase(device);
  known_answers_.forget_peer(peer);
  replication_.worker_left(peer);
  if (!device.empty()) networks_.erase(device);
  auto released = store_.release_worker(peer, now_ms());
  on_event_({{"event", "worker_gone"}, {"peer", peer}, {"reason", why},
             {"requeued", released ? *released : 0}});
}

json Coordinator::handle_worker(const json& req, const ServiceContext& ctx, std::string& device,
                                std::string& public_key, Frames& frames) {
  const std::string peer = ctx.consumer.str();
  const std::string op = string_or(req, "op");
  auto now = now_ms();
  if (op == "register") {
    if (!req.contains("public_key") || !req["public_key"].is_string()) return refuse("register without public_key");
    auto raw = hex_decode(req["public_key"].get<std::string>());
    if (!raw || raw->size() != 32) return refuse("bad public_key");
    std::array<std::uint8_t, 32> key{};
    std::copy(raw->begin(), raw->end(), key.begin());
    if (PeerId::from_raw_public_key(key) != ctx.consumer) return refuse("public_key is not the session's key");
    public_key = *raw;
    const json d = field_or(req, "device");
    if (!d.is_object()) return refuse("bad device");
    std::string kind = string_or(d, "kind", "cpu"), name = string_or(d, "name", "cpu");
    double hint = number_or(d, "score", 0.0), price = number_or(d, "price", 0.0);
    if ((kind != "cpu" && kind != "gpu" && kind != "webgpu") || name.size() > 200 || !(hint >= 0 && hint < 1e15) ||
        !(price >= 0 && price < 1e9))
      return refuse("bad device");
    if (const double most = store_.policy().max_price; most > 0 && price > most)
      return refuse("this pool pays at most " + format_price(most) + " credits per device-hour: join with --price " +
                    format_price(most) + " or less");
    auto id = store_.register_device(peer, kind, name, price, now);
    if (!id) return refuse(id.error());
    if (!device.empty() && device != *id) calibrations_.erase(device);
    device = *id;
    const std::string network = scheduling::network_of(ctx.address);
    networks_[device] = network;
    replication_.worker_network(peer, network);
    known_answers_.forget_peer(peer);  // a known-answer task it held before is void
    // Leases this worker holds but does not know of (a coordinator that died
    // between granting a claim and answering it) would otherwise be renewed
    // by its heartbeats forever: requeue all but the ones it has results for.
    // The ones it keeps keep the terms they were leased at.
    std::vector<std::string> holding;
    if (req.contains("holding") && req["holding"].is_array())
      for (const auto& t : req["holding"])
        if (t.is_string() && holding.size() < 10000) holding.push_back(t.get<std::string>());
    auto stale = store_.release_stale_leases(peer, holding, now);
    if (!stale) return refuse(stale.error());
    if (*stale > 0) on_event_({{"event", "stale_leases_released"}, {"peer", peer}, {"count", *stale}});
    // Its score is what we measure (pool/calibration.hpp): no claims before the answer.
    auto challenge = make_challenge(hint, challenge_rng_());
    calibrations_[device] = {challenge, hint, price, std::chrono::steady_clock::now()};
    return {{"ok", true}, {"device", device}, {"lease_ms", store_.policy().lease_ms},
            {"calibrate", {{"seed", challenge.seed}, {"iterations", challenge.iterations}}}};
  }
  if (op == "calibrated") {
    auto c = calibrations_.find(device);
    if (c == calibrations_.end()) return refuse("no calibration was asked of this device");
    const auto pending = c->second;
    calibrations_.erase(c);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - pending.issued).count();
    std::vector<std::string> answer;
    if (req.contains("checkpoints") && req["checkpoints"].is_array() &&
        req["checkpoints"].size() == static_cast<std::size_t>(kCalibrationSegments))
      for (const auto& v : req["checkpoints"]) answer.push_back(v.is_string() ? v.get<std::string>() : "");
    std::uniform_int_distribution<int> pick(0, kCalibrationSegments - 1);
    const int a = pick(challenge_rng_), b = (a + 1 + pick(challenge_rng_) % (kCalibrationSegments - 1)) % kCalibrationSegments;
    if (!check_answer(pending.challenge, answer, a, b)) {
      if (ctx.audit) ctx.audit("pool_calibration", "refuse", "wrong calibration answer", {{"device", device}});
      return refuse("the calibration answer is wrong");
    }
    const double score = measured_score(pending.challenge, seconds, pending.hint);
    if (auto r = store_.set_device_score(device, score); !r) return refuse(r.error());
    if (learned_) learned_->device_joined({device, peer, networks_[device], std::max(score, 1.0), pending.price}, now_s());
    on_event_({{"event", "device_registered"}, {"device", device}, {"score", score}, {"hint", pending.hint},
               {"price", pending.price}, {"network", networks_[device]}});
    return {{"ok", true}, {"score", score}};
  }
  if (device.empty()) return refuse("register first");
  if (op == "heartbeat") return {{"ok", true}};
  if (op == "claim") {
    if (calibrations_.count(device)) return refuse("answer the calibration first");
    if (auto excluded = store_.exclusion(device); excluded && *excluded)
      return refuse("this device is excluded from the pool: " + **excluded);
    if (auto kat = known_answer_claim(device, peer)) return *kat;
    std::optional<std::string> from_job;
    auto preference = scheduling::Preference::balanced;
    if (learned_) {
      auto choice = learned_choice(device, peer);
      if (auto* wait = std::get_if<json>(&choice)) return *wait;
      from_job = std::get<LearnedChoice>(choice).job;
      preference = std::get<LearnedChoice>(choice).preference;
    }
    auto pending = store_.pending_count(static_cast<std::int64_t>(waiting_.size()) + 1);
    if (!pending) return refuse(pending.error());
    auto& me = waiting_[device];
    if (me.id.empty()) {
      me.id = device;
      me.since = std::chrono::system_clock::now();
      if (auto score = store_.device_score(device)) me.score = *score;
    }
    // Forget devices that stopped asking (they are busy or gone).
    auto cutoff = std::chrono::system_clock::now() - std::chrono::seconds(2);
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
    max = std::clamp<std::int64_t>(max, 1, kMaxClaimBatch);
    if (max > 1) {  // never more than a fair share of what is pending
      const std::int64_t online = std::max<std::int64_t>(workers_online_, 1);
      auto pending_now = store_.pending_count(kMaxClaimBatch * online);
      if (!pending_now) return refuse(pending_now.error());
      max = std::clamp<std::int64_t>(*pending_now / online, 1, max);
    }
    json tasks = json::array();
    auto leased = store_.claim_many(device, peer, now, max, from_job);
    if (!leased) return refuse(leased.error());
    std::set<std::pair<std::string, std::int64_t>> shards_claimed;
    const auto free = free_networks(device);
    for (auto& t : *leased) {
      auto c = replication_.on_claimed(t, peer, now, free);
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
      if (learned_) learned_->task_started({t.id, device, t.job, t.workload, preference, 1}, now_s());
      job_progress_[t.job] = std::chrono::steady_clock::now();
      tasks.push_back({{"id", t.id}, {"job", t.job}, {"shard", t.shard}, {"shards", t.shards}, {"attempt", t.attempt},
                       {"workload", t.workload}, {"spec", t.spec}});
    }
    // A device that may claim but finds nothing it may run (every pending
    // task is a copy of a shard it already ran, pool/replication.hpp) must
    // not hold back the others for the next 2 s.
    if (tasks.empty()) {
      if (*pending > 0) found_nothing_[device] = std::chrono::system_clock::now();
      return {{"ok", true}, {"tasks", tasks}, {"retry_ms", 200}};
    }
    found_nothing_.erase(device);
    waiting_.erase(device);
    return {{"ok", true}, {"tasks", tasks}};
  }
  if (op == "results") {  // several results (or failures) in one message and one transaction
    if (!req.contains("results") || !req["results"].is_array() || req["results"].size() > kMaxClaimBatch)
      return refuse("results must be a list of at most " + std::to_string(kMaxClaimBatch));
    auto batch = store_.batch(/*shared=*/false);
    if (!batch) return refuse(batch.error());
    json answers = json::array();
    // Results that passed their checks are completed together after the loop
    // (their answers are null until then): one set of statements, not one per result.
    std::vector<DeferredResult> deferred;
    {
      deferred_ = &deferred;
      struct Unset {  // also when an answer throws: deferred_ must not outlive `deferred`
        std::vector<DeferredResult>*& p;
        ~Unset() { p = nullptr; }
      } unset{deferred_};
      for (const auto& one : req["results"]) {
        const std::string inner = string_or(one, "op");
        answers.push_back(inner == "result" || inner == "failed" ? handle_worker(one, ctx, device, public_key, frames)
                                                                 : refuse("a batch holds results and failures only"));
      }
    }
    if (!deferred.empty()) {
      std::vector<Completion> completions;
      for (const auto& d : deferred) completions.push_back({d.task, d.attempt, &d.result});
      auto outcomes = store_.complete_many(peer, completions, now);
      std::size_t k = 0;
      for (auto& answer : answers) {
        if (!answer.is_null()) continue;
        answer = outcomes ? completed(deferred[k].task, peer, deferred[k].result, (*outcomes)[k]) : refuse(outcomes.error());
        ++k;
      }
    }
    if (auto c = batch->commit(); !c) return refuse(c.error());
    return {{"ok", true}, {"answers", answers}};
  }
  if (op == "input") {
    auto input = store_.job_input(string_or(req, "job"));
    if (!input) return refuse(input.error());
    return {{"ok", true}, {"input", *input}};
  }
  const std::string task = string_or(req, "task");
  const std::int64_t attempt = int_or(req, "attempt", -1);
  if ((op == "failed" || op == "result") && task.empty()) return refuse(op + " without its task id");
  if (op == "failed") {
    if (known_answers_.take(peer, task, attempt)) return {{"ok", true}};  // no verdict: it may try another
    std::string reason = string_or(req, "reason", "failed");
    if (reason.size() > 1000) reason.resize(1000);
    learned_finished(task, device, scheduling::Outcome::failed);
    auto r = store_.fail_attempt(task, attempt, peer, "worker: " + reason, now);
    if (!r) return refuse(r.error());
    on_event_({{"event", "task_failed"}, {"task", task}, {"peer", peer}, {"reason", reason}});
    return {{"ok", true}};
  }
  if (op == "result") {
    // This result's frames (announced_frames() counted them): taken even
    // when the result is refused, so the next result gets its own.
    const auto announced = announced_frames(req);
    const std::size_t count = std::min(announced ? *announced : 0, frames.all.size() - frames.next);
    std::vector<std::string> own(std::make_move_iterator(frames.all.begin() + static_cast<std::ptrdiff_t>(frames.next)),
                                 std::make_move_iterator(frames.all.begin() + static_cast<std::ptrdiff_t>(frames.next + count)));
    frames.next += count;
    auto result = parse_result(req, std::move(own));
    std::string bad;
    if (!result) {
      bad = "malformed result: " + result.error().what();
    } else {
      auto sig = hex_decode(result->signature);
      auto bytes = result_signing_bytes(task, attempt, *result);
      std::array<std::uint8_t, 32> key{};
      std::copy(public_key.begin(), public_key.end(), key.begin());
      if (!sig || !Identity::verify(ctx.consumer, key, bytes,
                                    {reinterpret_cast<const std::uint8_t*>(sig->data()), sig->size()}))
        bad = "result signature does not verify";
    }
    if (auto kat = known_answers_.take(peer, task, attempt)) {
      if (!bad.empty()) return {{"ok", true}, {"accepted", false}, {"why", bad}};
      return known_answer_result(*kat, task, peer, *result, ctx, now);
    }
    // Exit status is a result: a run that exited non-zero is a failed shard
    // (its exit code and stderr kept for the submitter, never paid, run
    // elsewhere while the job's --retries allow). A replicated job's runs
    // are compared first: its quorum decides whether the shard failed.
    if (bad.empty() && result->exit_code != 0) {
      auto ref = store_.task_ref(task);
      if (ref && *ref && !replication_.replicates((*ref)->job))
        return shard_failed(task, attempt, peer, device, *result, now);
    }
    std::optional<Verdict> verdict;
    if (bad.empty()) {
      verdict = verify(task, *result);
      if (verdict && !verdict->accepted) bad = "verification failed: " + verdict->why;
    }
    if (verdict) record_check(device, task, peer, verdict->accepted, bad, ctx, now);
    if (learned_) {
      learned_finished(task, device, bad.empty() ? scheduling::Outcome::ok
                                                 : (verdict ? scheduling::Outcome::invalid : scheduling::Outcome::failed));
      if (verdict) learned_->verdict(device, verdict->accepted);
    }
    // Checked: from here on the files are stored, compared and served as base64.
    if (bad.empty()) inline_frames(*result);
    if (bad.empty() && !verdict) {  // no computational check: copies on other peers, when the job asks
      auto audit = [&ctx](const std::string& what, const std::string& why, const json& detail) {
        if (ctx.audit) ctx.audit(what, "refuse", why, detail);
      };
      if (auto answer = replication_.on_result(task, attempt, peer, device, *result, now, audit)) return *answer;
    }
    if (!bad.empty()) {
      if (auto r = store_.fail_attempt(task, attempt, peer, bad, now); !r) return refuse(r.error());
      on_event_({{"event", "result_rejected"}, {"task", task}, {"peer", peer}, {"reason", bad}});
      return {{"ok", true}, {"accepted", false}, {"why", bad}};
    }
    if (deferred_) {  // inside a "results" batch: completed with the others
      deferred_->push_back({task, attempt, std::move(*result)});
      return nullptr;
    }
    auto outcome = store_.complete(task, attempt, peer, *result, now);
    if (!outcome) return refuse(outcome.error());
    return completed(task, peer, *result, *outcome);
  }
  return refuse("unknown op '" + op.substr(0, 40) + "'");
}

void Coordinator::record_check(const std::string& device, const std::string& task, const std::string& peer, bool valid,
                               const std::string& why, const ServiceContext& ctx, std::int64_t now) {
  // Reputation: checked results feed the device's record; wrong ones
  // are never retried on this peer and exclude the device past a threshold.
  auto excluded = store_.record_check(device, task, peer, valid, why, store_.policy().exclude_after, now);
  if (!excluded) spdlog::warn("pool: {}", excluded.error().what());
  replication_.record_check(device, valid);
  if (valid) proven_.insert(device);
  if (!valid && ctx.audit) ctx.audit("pool_result", "refuse", why, {{"task", task}, {"device", device}});
  if (excluded && *excluded) {
    on_event_({{"event", "device_excluded"}, {"device", device}, {"peer", peer}, {"reason", **excluded}});
    if (ctx.audit) ctx.audit("pool_device_excluded", "refuse", **excluded, {{"device", device}});
  }
}

std::optional<json> Coordinator::known_answer_claim(const std::string& device, const std::string& peer) {
  // One at a time, and no other work meanwhile: an unproven device shows
  // what its results are worth before they count in a job.
  if (known_answers_.outstanding(device)) return json{{"ok", true}, {"tasks", json::array()}, {"retry_ms", 200}};
  if (known_answers_.known() == 0) return std::nullopt;
  std::optional<LeasedTask> t;
  bool tiebreak = false;
  if (!proven_.count(device)) {
    auto valid = store_.valid_results(device);
    if (!valid) return refuse(valid.error());
    if (*valid > 0) proven_.insert(device);
    else t = known_answers_.issue(device, peer);
  }
  // A disputed known answer goes to a device with a proven record,
  // independent of the answer's producers and of the disputer, before
  // anyone is judged by it.
  if (!t && proven_.count(device) && known_answers_.open_disputes() > 0) {
    auto valid = store_.valid_results(device);
    if (!valid) return refuse(valid.error());
    if (*valid >= kProvenChecks) t = known_answers_.issue_tiebreak(device, peer, networks_[device]), tiebreak = true;
  }
  if (!t) return std::nullopt;
  on_event_({{"event", tiebreak ? "known_answer_tiebreak_issued" : "known_answer_issued"}, {"device", device},
             {"peer", peer}, {"task", t->id}, {"attempt", t->attempt}});
  json task = {{"id", t->id}, {"job", t->job}, {"shard", t->shard}, {"shards", t->shards}, {"attempt", t->attempt},
               {"workload", t->workload}, {"spec", t->spec}};
  return json{{"ok", true}, {"tasks", json::array({task})}};
}

json Coordinator::known_answer_result(const KnownAnswers::Issued& issued, const std::string& task, const std::string& peer,
                                      const TaskResult& result, const ServiceContext& ctx, std::int64_t now) {
  // Judged like a quorum's copy, but nothing reaches the job: its task was
  // completed and paid once already (docs/SCHEDULER.md).
  const json held = {{"ok", true}, {"accepted", false}, {"held", true}, {"why", "held until it is checked again"}};
  if (issued.tiebreak) {
    auto r = known_answers_.resolve(task, result);
    const std::string why = "verification failed: a trusted independent re-run contradicts this result";
    for (const auto& p : r.wrong)
      if (!p.device.empty()) record_check(p.device, task, p.peer, false, why, ctx, now);
    for (const auto& p : r.right) record_check(p.device, task, p.peer, true, "", ctx, now);
    if (r.tiebreak_valid) record_check(issued.device, task, peer, true, "", ctx, now);
    if (learned_ && r.tiebreak_valid) learned_->verdict(issued.device, true);
    on_event_({{"event", "known_answer_tiebreak"}, {"device", issued.device}, {"peer", peer}, {"task", task},
               {"wrong", r.wrong.size()}, {"right", r.right.size()}, {"answer_dropped", r.answer_dropped}});
    return {{"ok", true}, {"accepted", true}, {"why", ""}, {"paid", format_credits(0)}};
  }
  const bool right = same_result(issued.answer, result);
  if (!right) {
    // Not a verdict yet: the known answer could be the wrong one. A trusted
    // independent device re-runs it first; this one never gets it again.
    known_answers_.dispute(task, {peer, issued.device, networks_[issued.device]}, result);
    on_event_({{"event", "known_answer_disputed"}, {"device", issued.device}, {"peer", peer}, {"task", task}});
    return held;
  }
  record_check(issued.device, task, peer, true, "", ctx, now);
  if (auto r = store_.record_verification(issued.job, true, 0, 0); !r) spdlog::warn("pool: {}", r.error().what());
  if (learned_) learned_->verdict(issued.device, true);
  on_event_({{"event", "known_answer_checked"}, {"device", issued.device}, {"peer", peer}, {"task", task},
             {"valid", true}});
  return {{"ok", true}, {"accepted", true}, {"why", ""}, {"paid", format_credits(0)}};
}

json Coordinator::shard_failed(const std::string& task, std::int64_t attempt, const std::string& peer,
                               const std::string& device, const TaskResult& result, std::int64_t now) {
  learned_finished(task, device, scheduling::Outcome::failed);
  auto f = store_.shard_failed(task, attempt, peer, result.exit_code, result.stderr_tail, false, now);
  if (!f) return refuse(f.error());
  if (!f->recorded) return {{"ok", true}, {"accepted", false}, {"why", "lease is no longer yours"}};
  const std::string why = "exit code " + std::to_string(result.exit_code);
  on_event_({{"event", "task_failed"}, {"task", task}, {"peer", peer}, {"exit_code", result.exit_code},
             {"stderr", valid_utf8(result.stderr_tail.substr(0, 200))}, {"retried", f->retried}});
  if (f->job_finished) forget_job(task);
  return {{"ok", true}, {"accepted", false}, {"failed", true},
          {"why", why + (f->retried ? "; the shard runs again on another peer" : "")}};
}

std::vector<std::string> Coordinator::free_networks(const std::string& device) const {
  const auto cutoff = std::chrono::system_clock::now() - std::chrono::seconds(2);
  std::vector<std::string> out;
  for (const auto& [id, w] : waiting_) {
    // Not one that found nothing it may run (e.g. it ran the shard already).
    auto nothing = found_nothing_.find(id);
    if (id == device || w.since < cutoff || (nothing != found_nothing_.end() && nothing->second >= cutoff)) continue;
    if (auto n = networks_.find(id); n != networks_.end()) out.push_back(n->second);
  }
  return out;
}

json Coordinator::completed(const std::string& task, const std::string& peer, const TaskResult& result,
                            const CompleteOutcome& outcome) {
  if (outcome.accepted) publish_progress(task, result);
  if (outcome.job_finished) forget_job(task);
  on_event_({{"event", outcome.accepted ? "task_done" : "result_ignored"}, {"task", task}, {"peer", peer},
             {"paid", format_credits(outcome.paid)}, {"why", outcome.why}});
  return {{"ok", true}, {"accepted", outcome.accepted}, {"why", outcome.why}, {"paid", format_credits(outcome.paid)}};
}

ResultChecker* Coordinator::checker_for(const std::string& job) {
  auto it = checkers_.find(job);
  if (it != checkers_.end()) return it->second.get();
  std::unique_ptr<ResultChecker> made;
  if (auto def = store_.job_definition(job)) {
    if (const Workload* w = find_workload(def->workload)) {
      auto c = w->checker(def->spec, def->input);
      if (c) made = std::move(*c);
      else spdlog::warn("pool: job {}: cannot check results: {}", job, c.error().what());
    }
  }
  return (checkers_[job] = std::move(made)).get();
}

json Coordinator::verification_method(const std::string& job) {
  auto it = methods_.find(job);
  if (it != methods_.end()) return it->second;
  json method = {{"method", "none"}};
  if (auto def = store_.job_definition(job))
    if (const Workload* w = find_workload(def->workload)) method = w->verification_method(def->spec);
  return methods_[job] = method;
}

void Coordinator::publish_progress(const std::string& task, const TaskResult& result) {
  auto ref = store_.task_ref(task);
  if (!ref || !*ref) return;
  auto it = specs_.find((*ref)->job);
  if (it == specs_.end()) {
    auto def = store_.job_definition((*ref)->job);
    if (!def) return;
    it = specs_.emplace((*ref)->job, std::make_pair(find_workload(def->workload), def->spec)).first;
  }
  const auto& [workload, spec] = it->second;
  if (!workload) return;
  if (auto event = workload->on_accepted(spec, (*ref)->shard, result)) {
    (*event)["job"] = (*ref)->job;
    on_event_(*event);
  }
}

void Coordinator::forget_job(const std::string& task) {
  auto ref = store_.task_ref(task);
  if (!ref || !*ref) return;
  checkers_.erase((*ref)->job);  // its matrices can be large
  job_progress_.erase((*ref)->job);
  specs_.erase((*ref)->job);
}

std::optional<Verdict> Coordinator::verify(const std::string& task, const TaskResult& result) {
  auto ref = store_.task_ref(task);
  if (!ref || !*ref) return std::nullopt;  // complete() refuses unknown tasks with its own reason
  ResultChecker* c = checker_for((*ref)->job);
  if (!c) return std::nullopt;
  auto start = std::chrono::steady_clock::now();
  Verdict v = c->check((*ref)->shard, result);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  if (auto r = store_.record_verification((*ref)->job, v.accepted, us, static_cast<std::int64_t>(v.compute_seconds * 1e6)); !r)
    spdlog::warn("pool: {}", r.error().what());
  return v;
}

asio::awaitable<void> Coordinator::serve_client(std::shared_ptr<MuxStream> stream, ServiceContext context) {
  while (true) {
    auto req = co_await read_stream_message(*stream, kMaxPoolMessageBytes);
    if (!req) break;
    json answer = answer_or_refuse("client message", [&] { return handle_client(*req, context); });
    auto w = co_await write_stream_message(*stream, answer);
    if (!w) break;
  }
}

json Coordinator::handle_client(const json& req, const ServiceContext& ctx) {
  const std::string peer = ctx.consumer.str();
  const std::string op = string_or(req, "op");
  auto now = now_ms();
  // Credits this session's link carries (`pool link --credits N`): minted
  // once, for the first peer that uses it. No credit for just showing up.
  if (!grants_without_credits_.count(ctx.grant.id)) {
    auto minted = store_.claim_link_credits(ctx.grant.id, peer, now);
    if (!minted) return refuse(minted.error());
    if (*minted > 0)
      on_event_({{"event", "link_credits_granted"}, {"peer", peer}, {"grant", ctx.grant.id},
                 {"credits", format_credits(*minted)}});
    if (grants_without_credits_.size() > 100'000) grants_without_credits_.clear();
    grants_without_credits_.insert(ctx.grant.id);
  }
  if (op == "submit") {
    std::string name = string_or(req, "workload");
    const Workload* workload = find_workload(name);
    if (!workload) return refuse("unknown workload '" + name.substr(0, 40) + "': this pool runs " + workload_names());
    const json spec = field_or(req, "spec");
    auto plan = workload->plan(spec);
    if (!plan) return refuse(plan.error());
    const json input = field_or(req, "input");
    if (!input.is_object()) return refuse("bad input");
    if (req.contains("prefer")) {  // what the learned scheduler optimises for this job
      const std::string prefer = string_or(req, "prefer");
      if (!scheduling::parse_preference(prefer)) return refuse("prefer must be fast, cheap or balanced");
      plan->info["prefer"] = prefer;
    }
    std::int64_t budget = req.contains("budget") && req["budget"].is_number_integer() ? req["budget"].get<std::int64_t>() : 0;
    JobRules rules;
    rules.retries = static_cast<int>(int_or(req, "retries", 0));
    rules.allow_failures = bool_or(req, "allow_failures", false);
    if (rules.retries < 0 || rules.retries > 100) return refuse("retries must be 0..100");
    // No work without pay: a job without a budget goes to free workers
    // only. Refused when none is online but priced ones are, saying so.
    if (budget <= 0) {
      auto prices = store_.online_prices();
      if (!prices) return refuse(prices.error());
      if (prices->free == 0 && prices->priced > 0)
        return refuse("without --budget a job runs on free workers (price 0) only, and none is online; the " +
                      std::to_string(prices->priced) + " online worker(s) charge from " + format_price(prices->cheapest) +
                      " credits per device-hour: give --budget CREDITS");
    }
    auto job = store_.create_job(peer, name, spec, input, plan->info, plan->tasks, budget, now, rules);
    if (!job) return refuse(job.error());
    json event = {{"event", "job_submitted"}, {"job", *job}, {"owner", peer}, {"workload", name},
                  {"tasks", plan->tasks}, {"budget", format_credits(budget)}};
    for (const auto& [k, v] : plan->info.items()) event[k] = v;
    on_event_(event);
    json answer = {{"ok", true}, {"job", *job}, {"tasks", plan->tasks}, {"free_only", budget <= 0}};
    if (budget <= 0) answer["note"] = "no --budget: only free workers (price 0) take this job's tasks";
    return answer;
  }
  if (op == "status" || op == "jobs") {
    std::optional<std::string> owner;
    if (op == "jobs") owner = peer;
    auto jobs = store_.jobs(owner);
    if (!jobs) return refuse(jobs.error());
    json out = {{"ok", true}, {"jobs", json::array()}};
    for (const auto& j : *jobs)
      if (!req.contains("job") || req["job"] == j.id) {
        json method = verification_method(j.id);
        if (string_or(method, "method") == "replication" || string_or(method, "method") == "spot-check") {
          method["copies"] = replication_.copies(j.id);
          if (auto n = replication_.networks(j.id)) method["networks"] = *n;
          // Verified only by quorums of independent parties: a shard the pool
          // could not check so is delivered, and counted, as unverified.
          method["unverified"] = j.unverified;
          method["verified"] = j.unverified == 0 && j.state == "done";
        }
        json row = job_json(j, method);
        auto failures = store_.failures(j.id, kMaxFailuresShown);
        if (!failures) return refuse(failures.error());
        row["failures"] = json::array();
        for (const auto& f : *failures)
          row["failures"].push_back({{"shard", f.shard}, {"attempt", f.attempt}, {"exit_code", f.exit_code},
                                     {"stderr", valid_utf8(f.stderr_tail)}, {"peer", f.peer}});
        out["jobs"].push_back(std::move(row));
      }
    if (op == "status") {
      auto devs = store_.devices();
      if (!devs) return refuse(devs.error());
      out["devices"] = json::array();
      for (const auto& d : *devs)
        out["devices"].push_back({{"id", d.id}, {"kind", d.kind}, {"name", d.name}, {"score", d.score},
                                  {"price", d.price}, {"online", d.online}, {"tasks_done", d.tasks_done},
                                  {"valid", d.valid}, {"invalid", d.invalid},
                                  {"excluded", d.excluded ? json(*d.excluded) : json(nullptr)},
                                  {"learned", learned_estimates(d.id)},
                                  {"network", networks_.count(d.id) ? json(networks_.at(d.id)) : json(nullptr)}});
    }
    return out;
  }
  if (op == "result") {
    std::int64_t shard = req.contains("shard") && req["shard"].is_number_integer() ? req["shard"].get<std::int64_t>() : -1;
    auto st = store_.job_status(string_or(req, "job"));
    if (!st) return refuse(st.error());
    if (st->owner != peer) return refuse("not your job");
    auto r = store_.result(st->id, shard);
    if (!r) return refuse(r.error());
    if (!*r) return {{"ok", true}, {"result", nullptr}};
    return {{"ok", true},
            {"result", {{"exit_code", (*r)->exit_code}, {"stdout", base64_encode((*r)->stdout_data)}, {"files", (*r)->files}}}};
  }
  if (op == "cancel") {
    auto r = store_.cancel_job(string_or(req, "job"), peer, now);
    if (!r) return refuse(r.error());
    return {{"ok", true}};
  }
  if (op == "credits") {
    auto b = store_.balance(peer_account(peer));
    if (!b) return refuse(b.error());
    auto entries = store_.entries_for(peer_account(peer));
    if (!entries) return refuse(entries.error());
    json list = json::array();
    for (const auto& e : *entries)
      list.push_back({{"txn", e.txn}, {"amount", format_credits(e.amount)}, {"kind", e.kind},
                      {"task", e.task ? json(*e.task) : json(nullptr)}});
    return {{"ok", true}, {"peer", peer}, {"balance", format_credits(*b)}, {"entries", list}};
  }
  return refuse("unknown op '" + op.substr(0, 40) + "'");
}

}  // namespace runsnack::pool
