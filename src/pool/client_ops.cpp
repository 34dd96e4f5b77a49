// The "pool-client" ops (wire.hpp draws them): one function each, without I/O.
#include "pool/client_ops.hpp"

#include "core/json_fields.hpp"
#include "pool/device_runs.hpp"
#include "pool/wire.hpp"
#include "pool/workload.hpp"
#include "pool/workloads/train_round.hpp"

namespace runsnack::pool {

using json = nlohmann::json;

namespace {

json refuse(const Error& e) { return refusal(e.what()); }

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

ClientOps::ClientOps(PoolStore& store, WorkerOps& workers, Trainer& trainer, std::function<void(const json&)> on_event)
    : store_(store), workers_(workers), trainer_(trainer), on_event_(std::move(on_event)) {}

json ClientOps::handle(const ClientSession& s, const Moment& now, const json& req) {
  const std::string& peer = s.peer;
  const std::string op = string_or(req, "op");
  // Credits this session's link carries (`pool link --credits N`): minted
  // once, for the first peer that uses it. No credit for just showing up.
  if (!grants_without_credits_.count(s.grant)) {
    auto minted = store_.claim_link_credits(s.grant, peer, now.wall_ms());
    if (!minted) return refuse(minted.error());
    if (*minted > 0)
      on_event_({{"event", "link_credits_granted"}, {"peer", peer}, {"grant", s.grant},
                 {"credits", format_credits(*minted)}});
    if (grants_without_credits_.size() > 100'000) grants_without_credits_.clear();
    grants_without_credits_.insert(s.grant);
  }
  if (op == "submit") return submit(peer, now, req);
  if (op == "status" || op == "jobs") return status(peer, req, op == "jobs");
  if (op == "result") return result(peer, req);
  if (op == "cancel") return cancel(peer, now, req);
  if (op == "credits") return credits(peer);
  if (op == "train") return trainer_.submit(peer, now.wall_ms(), req);
  if (op == "train_upload") return trainer_.upload(peer, now.wall_ms(), req);
  if (op == "train_status") return trainer_.status(peer, req);
  if (op == "train_result") return trainer_.result(peer, req);
  if (op == "train_cancel") return trainer_.cancel(peer, now.wall_ms(), req);
  return refusal("unknown op '" + op.substr(0, 40) + "'");
}

json ClientOps::submit(const std::string& peer, const Moment& now, const json& req) {
  std::string name = string_or(req, "workload");
  const Workload* workload = find_workload(name);
  if (!workload) return refusal("unknown workload '" + name.substr(0, 40) + "': this pool runs " + workload_names());
  // A round reads its training's data (PoolStore::job_input): only the trainer makes one.
  if (name == kTrainRoundWorkload) return refusal("train rounds are made by the coordinator: submit `train`");
  const json spec = field_or(req, "spec");
  auto plan = workload->plan(spec);
  if (!plan) return refuse(plan.error());
  const json input = field_or(req, "input");
  if (!input.is_object()) return refusal("bad input");
  if (req.contains("prefer")) {  // what the learned scheduler optimises for this job
    const std::string prefer = string_or(req, "prefer");
    if (!scheduling::parse_preference(prefer)) return refusal("prefer must be fast, cheap or balanced");
    plan->info["prefer"] = prefer;
  }
  std::int64_t budget = req.contains("budget") && req["budget"].is_number_integer() ? req["budget"].get<std::int64_t>() : 0;
  JobRules rules;
  rules.retries = static_cast<int>(int_or(req, "retries", 0));
  rules.allow_failures = bool_or(req, "allow_failures", false);
  if (rules.retries < 0 || rules.retries > 100) return refusal("retries must be 0..100");
  // No work without pay: a job without a budget goes to free workers
  // only. Refused when none is online but priced ones are, saying so.
  if (budget <= 0) {
    auto prices = store_.online_prices();
    if (!prices) return refuse(prices.error());
    if (prices->free == 0 && prices->priced > 0)
      return refusal("without --budget a job runs on free workers (price 0) only, and none is online; the " +
                    std::to_string(prices->priced) + " online worker(s) charge from " + format_price(prices->cheapest) +
                    " credits per device-hour: give --budget CREDITS");
  }
  rules.needs = plan->needs.empty() ? name : plan->needs;
  auto job = store_.create_job(peer, name, spec, input, plan->info, plan->tasks, budget, now.wall_ms(), rules);
  if (!job) return refuse(job.error());
  json event = {{"event", "job_submitted"}, {"job", *job}, {"owner", peer}, {"workload", name},
                {"tasks", plan->tasks}, {"budget", format_credits(budget)}};
  for (const auto& [k, v] : plan->info.items()) event[k] = v;
  on_event_(event);
  json answer = {{"ok", true}, {"job", *job}, {"tasks", plan->tasks}, {"free_only", budget <= 0}};
  if (budget <= 0) answer["note"] = "no --budget: only free workers (price 0) take this job's tasks";
  return answer;
}

json ClientOps::status(const std::string& peer, const json& req, bool own_jobs_only) {
  std::optional<std::string> owner;
  if (own_jobs_only) owner = peer;
  auto jobs = store_.jobs(owner);
  if (!jobs) return refuse(jobs.error());
  json out = {{"ok", true}, {"jobs", json::array()}};
  for (const auto& j : *jobs)
    if (!req.contains("job") || req["job"] == j.id) {
      json method = workers_.verification_method(j.id);
      if (string_or(method, "method") == "replication" || string_or(method, "method") == "spot-check") {
        method["copies"] = workers_.replication().copies(j.id);
        if (auto n = workers_.replication().networks(j.id)) method["networks"] = *n;
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
  if (!req.contains("job")) out["trainings"] = field_or(trainer_.status(peer, json::object()), "trainings", json::array());
  if (!own_jobs_only) {  // "status": the devices too
    auto devs = store_.devices();
    if (!devs) return refuse(devs.error());
    out["devices"] = json::array();
    for (const auto& d : *devs) {
      const auto network = workers_.network_of_device(d.id);
      out["devices"].push_back({{"id", d.id}, {"kind", d.kind}, {"browser", is_browser_kind(d.kind)}, {"name", d.name},
                                {"max_task_seconds", d.max_task_seconds ? json(*d.max_task_seconds) : json(nullptr)},
                                {"score", d.score},
                                {"price", d.price}, {"online", d.online}, {"tasks_done", d.tasks_done},
                                {"valid", d.valid}, {"invalid", d.invalid}, {"leases_lost", d.leases_lost}, {"trusted", d.trusted},
                                {"excluded", d.excluded ? json(*d.excluded) : json(nullptr)},
                                {"learned", workers_.learned_estimates(d.id)},
                                {"network", network ? json(*network) : json(nullptr)}});
    }
  }
  return out;
}

json ClientOps::result(const std::string& peer, const json& req) {
  std::int64_t shard = req.contains("shard") && req["shard"].is_number_integer() ? req["shard"].get<std::int64_t>() : -1;
  auto st = store_.job_status(string_or(req, "job"));
  if (!st) return refuse(st.error());
  if (st->owner != peer) return refusal("not your job");
  auto r = store_.result(st->id, shard);
  if (!r) return refuse(r.error());
  if (!*r) return {{"ok", true}, {"result", nullptr}};
  return {{"ok", true},
          {"result", {{"exit_code", (*r)->exit_code}, {"stdout", base64_encode((*r)->stdout_data)}, {"files", (*r)->files}}}};
}

json ClientOps::cancel(const std::string& peer, const Moment& now, const json& req) {
  // `pool cancel LINK ID` stops a training too (its ids begin with "t", jobs' with "j").
  if (const std::string id = string_or(req, "job"); id.starts_with("t"))
    return trainer_.cancel(peer, now.wall_ms(), {{"training", id}});
  auto r = store_.cancel_job(string_or(req, "job"), peer, now.wall_ms());
  if (!r) return refuse(r.error());
  return {{"ok", true}};
}

json ClientOps::credits(const std::string& peer) {
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

}  // namespace runsnack::pool
