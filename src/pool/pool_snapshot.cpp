#include "pool/pool_snapshot.hpp"

#include "core/json_fields.hpp"
#include "pool/device_runs.hpp"

namespace runsnack::pool {

using json = nlohmann::json;

PoolSnapshot::PoolSnapshot(PoolStore& store, SnapshotLimits limits) : store_(store), limits_(limits) {}

void PoolSnapshot::observe(const json& event) {
  if (!event.is_object() || !event.contains("peer") || !event["peer"].is_string()) return;
  const std::string name = string_or(event, "event");
  if (name == "task_done") ++by_peer_[event["peer"].get<std::string>()].accepted;
  else if (name == "task_failed" || name == "result_rejected") ++by_peer_[event["peer"].get<std::string>()].failed;
}

Result<json> PoolSnapshot::ledger_json(std::int64_t now_ms) {
  if (!audit_ || now_ms - audit_at_ms_ >= limits_.audit_every.count()) {
    auto audit = store_.audit();
    if (!audit) return audit.error();
    audit_ = std::move(*audit);
    audit_at_ms_ = now_ms;
  }
  auto totals = store_.ledger_totals();
  if (!totals) return totals.error();
  auto recent = store_.recent_entries(limits_.ledger_entries);
  if (!recent) return recent.error();
  json entries = json::array();
  for (const auto& e : *recent)
    entries.push_back({{"txn", e.txn}, {"time", e.time_ms}, {"account", e.account}, {"amount", format_credits(e.amount)},
                       {"kind", e.kind}, {"task", e.task ? json(*e.task) : json(nullptr)}, {"job", e.job}});
  return json{{"audit_ok", audit_->ok},
              {"audit_problems", audit_->problems},
              {"transactions", audit_->transactions},
              {"entries", audit_->entries},
              {"totals",
               {{"minted", format_credits(totals->minted)},
                {"escrowed", format_credits(totals->escrowed)},
                {"paid", format_credits(totals->paid)},
                {"refunded", format_credits(totals->refunded)},
                {"held", format_credits(totals->held)}}},
              {"recent", entries}};
}

Result<json> PoolSnapshot::build(std::int64_t now_ms) {
  auto devices = store_.devices();
  if (!devices) return devices.error();
  auto earnings = store_.earnings_by_device();
  if (!earnings) return earnings.error();
  json devs = json::array();
  for (const auto& d : *devices) {
    json reliability = nullptr;
    if (d.valid + d.invalid > 0)  // results checked by computation: the reputation the store keeps
      reliability = static_cast<double>(d.valid) / static_cast<double>(d.valid + d.invalid);
    else if (auto it = by_peer_.find(d.peer); it != by_peer_.end() && it->second.accepted + it->second.failed > 0)
      reliability = static_cast<double>(it->second.accepted) / static_cast<double>(it->second.accepted + it->second.failed);
    auto earned = earnings->find(d.id);
    devs.push_back({{"id", d.id}, {"peer", d.peer}, {"kind", d.kind}, {"browser", is_browser_kind(d.kind)},
                    {"max_task_seconds", d.max_task_seconds ? json(*d.max_task_seconds) : json(nullptr)},
                    {"name", d.name}, {"score", d.score},
                    {"price", d.price}, {"online", d.online}, {"tasks_done", d.tasks_done},
                    {"earnings", format_credits(earned == earnings->end() ? 0 : earned->second)},
                    {"reliability", reliability}, {"excluded", d.excluded ? json(*d.excluded) : json(nullptr)}});
  }
  auto jobs = store_.recent_jobs(limits_.jobs);
  if (!jobs) return jobs.error();
  json js = json::array();
  for (const auto& j : *jobs) {
    json job = {{"job", j.id},         {"owner", j.owner},       {"state", j.state},     {"reason", j.reason},
                {"workload", j.workload}, {"tasks", j.tasks},    {"pending", j.pending}, {"running", j.leased},
                {"done", j.done},      {"failed", j.failed},     {"budget", format_credits(j.budget)},
                {"credits_spent", format_credits(j.spent)}};
    // The render preview's canvas size: what the workload's plan showed.
    if (j.info.is_object() && j.info.contains("image") && j.info["image"].is_object()) {
      const json& image = j.info["image"];
      if (image.contains("width") && image["width"].is_number_integer() && image.contains("height") &&
          image["height"].is_number_integer())
        job["image"] = {{"width", image["width"]}, {"height", image["height"]}};
    }
    js.push_back(std::move(job));
  }
  // Trainings with their curves: loss and accuracy a round (the newest rounds, bounded).
  auto trainings = store_.trainings(std::nullopt, limits_.jobs);
  if (!trainings) return trainings.error();
  json ts = json::array();
  for (const auto& t : *trainings) {
    json curve = json::array();
    const std::size_t from = t.metrics.size() > kCurveRounds ? t.metrics.size() - kCurveRounds : 0;
    for (std::size_t i = from; i < t.metrics.size(); ++i) {
      const json& m = t.metrics[i];
      curve.push_back({{"round", m.value("round", json())}, {"loss", m.value("loss", json())},
                       {"accuracy", m.value("accuracy", json())}});
    }
    ts.push_back({{"training", t.id}, {"owner", t.owner}, {"state", t.state}, {"reason", t.reason},
                  {"rounds_done", t.round}, {"rounds", t.spec.is_object() ? t.spec.value("rounds", json(0)) : json(0)},
                  {"workers", t.spec.is_object() ? t.spec.value("workers", json(0)) : json(0)}, {"curve", curve}});
  }
  auto ledger = ledger_json(now_ms);
  if (!ledger) return ledger.error();
  return json{{"time", now_ms}, {"devices", devs}, {"jobs", js}, {"trainings", ts}, {"ledger", *ledger}};
}

}  // namespace runsnack::pool
