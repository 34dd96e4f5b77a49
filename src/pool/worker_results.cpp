// The "result" op and what judges a result: signature, known answers,
// computational checks, replication, reputation (worker_ops.hpp).
#include "pool/worker_ops.hpp"

#include "core/json_fields.hpp"
#include "crypto/identity.hpp"
#include "pool/result_message.hpp"
#include "pool/wire.hpp"

#include <spdlog/spdlog.h>

namespace runsnack::pool {

using json = nlohmann::json;

namespace {
json refuse(const Error& e) { return refusal(e.what()); }
}  // namespace

json WorkerOps::result(WorkerSession& s, const Moment& now, const json& req, std::vector<DeferredResult>* deferred) {
  const std::string task = string_or(req, "task");
  const std::int64_t attempt = int_or(req, "attempt", -1);
  const std::string& peer = s.peer;
  const std::string& device = s.device;
  if (task.empty()) return refusal("result without its task id");
  // This result's frames (announced_frames() counted them): taken even
  // when the result is refused, so the next result gets its own.
  const auto announced = announced_frames(req);
  const std::size_t count = std::min(announced ? *announced : 0, s.frames.size() - s.next_frame);
  std::vector<std::string> own(std::make_move_iterator(s.frames.begin() + static_cast<std::ptrdiff_t>(s.next_frame)),
                               std::make_move_iterator(s.frames.begin() + static_cast<std::ptrdiff_t>(s.next_frame + count)));
  s.next_frame += count;
  auto result = parse_result(req, std::move(own));
  std::string bad;
  if (!result) {
    bad = "malformed result: " + result.error().what();
  } else {
    auto sig = hex_decode(result->signature);
    auto bytes = result_signing_bytes(task, attempt, *result);
    std::array<std::uint8_t, 32> key{};
    std::copy(s.public_key.begin(), s.public_key.end(), key.begin());
    if (!sig || !Identity::verify(s.consumer, key, bytes,
                                  {reinterpret_cast<const std::uint8_t*>(sig->data()), sig->size()}))
      bad = "result signature does not verify";
  }
  if (auto kat = known_answers_.take(peer, task, attempt)) {
    if (!bad.empty()) return {{"ok", true}, {"accepted", false}, {"why", bad}};
    return known_answer_result(*kat, task, s, *result, now);
  }
  // Exit status is a result: a run that exited non-zero is a failed shard
  // (its exit code and stderr kept for the submitter, never paid, run
  // elsewhere while the job's --retries allow). A replicated job's runs
  // are compared first: its quorum decides whether the shard failed.
  if (bad.empty() && result->exit_code != 0) {
    auto ref = store_.task_ref(task);
    if (ref && *ref && !replication_.replicates((*ref)->job)) return shard_failed(task, attempt, s, *result, now);
  }
  std::optional<Verdict> verdict;
  if (bad.empty()) {
    verdict = verify(task, *result);
    if (verdict && !verdict->accepted) bad = "verification failed: " + verdict->why;
  }
  // A refusal always counts against the device; an acceptance only when it proves the result.
  const bool screened = verdict && verdict->accepted && !verdict->conclusive;
  if (verdict && !screened) record_check(device, task, peer, verdict->accepted, bad, s, now);
  if (learned_) {
    learned_finished(task, device,
                     bad.empty() ? scheduling::Outcome::ok
                                 : (verdict ? scheduling::Outcome::invalid : scheduling::Outcome::failed),
                     now);
    if (verdict) learned_->verdict(device, verdict->accepted);
  }
  // Checked: from here on the files are stored, compared and served as base64.
  if (bad.empty()) inline_frames(*result);
  if (bad.empty() && (!verdict || screened)) {  // not proven by computation: copies on other peers, when the job asks
    auto audit = [&s](const std::string& what, const std::string& why, const json& detail) {
      if (s.audit) s.audit(what, "refuse", why, detail);
    };
    if (auto answer = replication_.on_result(task, attempt, peer, device, *result, now.wall_ms(), audit)) return *answer;
  }
  if (!bad.empty()) {
    if (auto r = store_.fail_attempt(task, attempt, peer, bad, now.wall_ms()); !r) return refuse(r.error());
    on_event_({{"event", "result_rejected"}, {"task", task}, {"peer", peer}, {"reason", bad}});
    return {{"ok", true}, {"accepted", false}, {"why", bad}};
  }
  if (deferred) {  // inside a "results" batch: completed with the others
    deferred->push_back({task, attempt, std::move(*result)});
    return nullptr;
  }
  auto outcome = store_.complete(task, attempt, peer, *result, now.wall_ms());
  if (!outcome) return refuse(outcome.error());
  return completed(task, peer, *result, *outcome);
}

void WorkerOps::record_check(const std::string& device, const std::string& task, const std::string& peer, bool valid,
                             const std::string& why, const WorkerSession& s, const Moment& now) {
  // Reputation: checked results feed the device's record; wrong ones
  // are never retried on this peer and exclude the device past a threshold.
  auto excluded = store_.record_check(device, task, peer, valid, why, store_.policy().exclude_after, now.wall_ms());
  if (!excluded) spdlog::warn("pool: {}", excluded.error().what());
  replication_.record_check(device, valid);
  if (valid) proven_.insert(device);
  if (!valid && s.audit) s.audit("pool_result", "refuse", why, {{"task", task}, {"device", device}});
  if (excluded && *excluded) {
    on_event_({{"event", "device_excluded"}, {"device", device}, {"peer", peer}, {"reason", **excluded}});
    if (s.audit) s.audit("pool_device_excluded", "refuse", **excluded, {{"device", device}});
  }
}

json WorkerOps::known_answer_result(const KnownAnswers::Issued& issued, const std::string& task, const WorkerSession& s,
                                    const TaskResult& result, const Moment& now) {
  const std::string& peer = s.peer;
  // Judged like a quorum's copy, but nothing reaches the job: its task was
  // completed and paid once already (docs/SCHEDULER.md).
  const json held = {{"ok", true}, {"accepted", false}, {"held", true}, {"why", "held until it is checked again"}};
  if (issued.tiebreak) {
    auto r = known_answers_.resolve(task, result);
    const std::string why = "verification failed: a trusted independent re-run contradicts this result";
    for (const auto& p : r.wrong)
      if (!p.device.empty()) record_check(p.device, task, p.peer, false, why, s, now);
    for (const auto& p : r.right) record_check(p.device, task, p.peer, true, "", s, now);
    if (r.tiebreak_valid) record_check(issued.device, task, peer, true, "", s, now);
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
  record_check(issued.device, task, peer, true, "", s, now);
  if (auto r = store_.record_verification(issued.job, true, 0, 0); !r) spdlog::warn("pool: {}", r.error().what());
  if (learned_) learned_->verdict(issued.device, true);
  on_event_({{"event", "known_answer_checked"}, {"device", issued.device}, {"peer", peer}, {"task", task},
             {"valid", true}});
  return {{"ok", true}, {"accepted", true}, {"why", ""}, {"paid", format_credits(0)}};
}

json WorkerOps::shard_failed(const std::string& task, std::int64_t attempt, const WorkerSession& s,
                             const TaskResult& result, const Moment& now) {
  learned_finished(task, s.device, scheduling::Outcome::failed, now);
  auto f = store_.shard_failed(task, attempt, s.peer, result.exit_code, result.stderr_tail, false, now.wall_ms());
  if (!f) return refuse(f.error());
  if (!f->recorded) return {{"ok", true}, {"accepted", false}, {"why", "lease is no longer yours"}};
  const std::string why = "exit code " + std::to_string(result.exit_code);
  on_event_({{"event", "task_failed"}, {"task", task}, {"peer", s.peer}, {"exit_code", result.exit_code},
             {"stderr", valid_utf8(result.stderr_tail.substr(0, 200))}, {"retried", f->retried}});
  if (f->job_finished) forget_job(task);
  return {{"ok", true}, {"accepted", false}, {"failed", true},
          {"why", why + (f->retried ? "; the shard runs again on another peer" : "")}};
}

json WorkerOps::completed(const std::string& task, const std::string& peer, const TaskResult& result,
                          const CompleteOutcome& outcome) {
  if (outcome.accepted) publish_progress(task, result);
  if (outcome.job_finished) forget_job(task);
  on_event_({{"event", outcome.accepted ? "task_done" : "result_ignored"}, {"task", task}, {"peer", peer},
             {"paid", format_credits(outcome.paid)}, {"why", outcome.why}});
  return {{"ok", true}, {"accepted", outcome.accepted}, {"why", outcome.why}, {"paid", format_credits(outcome.paid)}};
}

ResultChecker* WorkerOps::checker_for(const std::string& job) {
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

json WorkerOps::verification_method(const std::string& job) {
  auto it = methods_.find(job);
  if (it != methods_.end()) return it->second;
  json method = {{"method", "none"}};
  if (auto def = store_.job_definition(job))
    if (const Workload* w = find_workload(def->workload)) method = w->verification_method(def->spec);
  return methods_[job] = method;
}

void WorkerOps::publish_progress(const std::string& task, const TaskResult& result) {
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

void WorkerOps::forget_job(const std::string& task) {
  auto ref = store_.task_ref(task);
  if (!ref || !*ref) return;
  forget_job_state((*ref)->job);
}

void WorkerOps::forget_job_state(const std::string& job) {
  checkers_.erase(job), job_progress_.erase(job), specs_.erase(job);  // its checker's matrices can be large
  for (auto it = abandoned_.begin(); it != abandoned_.end();) {
    it->second.erase(job);
    it = it->second.empty() ? abandoned_.erase(it) : std::next(it);
  }
}

std::optional<Verdict> WorkerOps::verify(const std::string& task, const TaskResult& result) {
  auto ref = store_.task_ref(task);
  if (!ref || !*ref) return std::nullopt;  // complete() refuses unknown tasks with its own reason
  ResultChecker* c = checker_for((*ref)->job);
  if (!c) return std::nullopt;
  // The check's own cost (a measure, not the message's time).
  auto start = std::chrono::steady_clock::now();
  Verdict v = c->check((*ref)->shard, result);
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count();
  if (auto r = store_.record_verification((*ref)->job, v.accepted, us, static_cast<std::int64_t>(v.compute_seconds * 1e6)); !r)
    spdlog::warn("pool: {}", r.error().what());
  return v;
}

}  // namespace runsnack::pool
