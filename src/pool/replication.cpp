#include "pool/replication.hpp"

#include "core/json_fields.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/scheduling/network.hpp"

#include <algorithm>

namespace runsnack::pool {

using json = nlohmann::json;

bool same_result(const TaskResult& a, const TaskResult& b) {
  return a.exit_code == b.exit_code && a.stdout_data == b.stdout_data && a.files == b.files;
}

Replication::Replication(PoolStore& store, std::function<void(const json&)> on_event, std::uint64_t seed,
                         KnownAnswers& known)
    : store_(store), on_event_(std::move(on_event)), trust_({}, seed), rng_(seed ^ 0x5107c4ecULL), known_(known) {}

void Replication::worker_network(const std::string& peer, const std::string& network) { networks_[peer] = network; }

std::string Replication::network(const std::string& peer) const {
  auto it = networks_.find(peer);
  return it == networks_.end() ? scheduling::kUnknownNetwork : it->second;
}

std::optional<std::int64_t> Replication::networks(const std::string& job) const {
  auto it = job_networks_.find(job);
  if (it == job_networks_.end()) return std::nullopt;
  return it->second;
}

void Replication::record_check(const std::string& device, bool valid) {
  trust_.record(device, valid ? scheduling::Verdict::valid : scheduling::Verdict::invalid);
}

std::optional<Replication::JobRule> Replication::rule(const std::string& job) {
  auto it = rules_.find(job);
  if (it != rules_.end()) return it->second;
  std::optional<JobRule> r;
  if (auto def = store_.job_definition(job); def && def->workload == "exec" && def->spec.is_object()) {
    JobRule j;
    j.replicas = int_or(def->spec, "replicas", 1);
    j.spot_check = number_or(def->spec, "spot_check", 0.0);
    j.shards = int_or(def->spec, "shards", std::int64_t{1});
    if (j.replicas > 1 || j.spot_check > 0) r = j;
  }
  return rules_[job] = r;
}

Result<bool> Replication::on_claimed(LeasedTask& task, const std::string& peer, std::int64_t now_ms,
                                     const std::vector<std::string>& free_networks) {
  auto r = rule(task.job);
  if (!r) return true;
  if (task.shard < r->shards) {
    // An original runs again when its lease is lost (its worker went away):
    // not on a peer with a copy of the undecided shard, whose two results
    // would count once. Once decided, a run only fills the original's row.
    auto g = groups_.find(task.job);
    if (g == groups_.end()) return true;
    auto it = g->second.find(task.shard);
    if (it == g->second.end() || it->second.decided) return true;
    for (const auto& h : it->second.held)
      if (h.peer == peer) return false;
    for (const auto& [copy, holder] : it->second.claimed)
      if (holder == peer) return false;
    return true;
  }
  auto of = store_.copy_of(task.id);
  if (!of) return of.error();
  if (!*of) return true;
  const std::int64_t shard = **of;
  if (auto g = groups_.find(task.job); g != groups_.end())
    if (auto it = g->second.find(shard); it != g->second.end()) {
      Group& group = it->second;
      std::vector<std::string> used;
      for (const auto& h : group.held) used.push_back(network(h.peer));
      for (const auto& [copy, holder] : group.claimed)
        if (copy != task.id) used.push_back(network(holder));
      if (scheduling::leave_copy_for_another_network(network(peer), used, free_networks)) return false;
      group.claimed[task.id] = peer;
    }
  auto siblings = store_.copies_of(task.job, shard);
  if (!siblings) return siblings.error();
  for (const auto& s : *siblings)
    if (s != task.id)
      if (auto a = store_.avoid_peer(s, peer, "this peer runs another copy of the shard", now_ms); !a) return a.error();
  task.shard = shard;  // the worker runs the original shard: a copy looks like any task
  return true;
}

void Replication::quorum_decided(const std::string& job, std::int64_t shard, const Group& g, std::int64_t shards) {
  std::vector<std::string> nets, peers;
  for (const auto& h : g.held) nets.push_back(network(h.peer)), peers.push_back(h.peer);
  for (const auto& [copy, holder] : g.claimed) peers.push_back(holder);
  const auto n = static_cast<std::int64_t>(scheduling::distinct_networks(nets));
  auto [it, fresh] = job_networks_.emplace(job, n);
  if (!fresh) it->second = std::min(it->second, n);
  if (n < static_cast<std::int64_t>(g.held.size()))
    on_event_({{"event", "quorum_not_network_diverse"}, {"job", job}, {"shard", shard}, {"copies", g.held.size()},
               {"networks", n}});
  // The shard's original task, handed out again later as a known-answer
  // task: the next attempt after the last one seen.
  auto def = store_.job_definition(job);
  if (!def) return;
  LeasedTask t;
  t.id = job + "." + std::to_string(shard);
  t.job = job, t.shard = shard, t.shards = shards, t.workload = def->workload, t.spec = def->spec;
  t.attempt = 1;
  for (const auto& h : g.held)
    if (h.task == t.id) t.attempt = std::max(t.attempt, h.attempt);
  t.attempt += 1;
  known_.learn(t, *g.decided, std::move(peers));
}

std::optional<json> Replication::on_result(const std::string& task, std::int64_t attempt, const std::string& peer,
                                           const std::string& device, const TaskResult& result, std::int64_t now_ms,
                                           const Audit& audit) {
  auto ref = store_.task_ref(task);
  if (!ref || !*ref) return std::nullopt;
  const std::string job = (*ref)->job;
  auto r = rule(job);
  if (!r) return std::nullopt;
  std::int64_t shard = (*ref)->shard;
  if (shard >= r->shards) {
    auto of = store_.copy_of(task);
    if (!of || !*of) return std::nullopt;
    shard = **of;
  }
  trust_.device_seen(device, {peer, ""});
  auto& groups = groups_[job];
  auto it = groups.find(shard);
  if (it == groups.end()) {
    // The shard's first result: how many copies must agree. --replicas asks
    // for R on every shard; a spot check re-runs at least the given share and
    // every result of a device the trust policy does not trust yet.
    int needed = r->replicas;
    if (r->replicas <= 1) needed = (trust_.replicate(device) || rng_.uniform() < r->spot_check) ? 2 : 1;
    if (needed == 1) {
      trust_.record(device, scheduling::Verdict::unchecked);
      return std::nullopt;
    }
    it = groups.emplace(shard, Group{needed, {}, std::nullopt, {}}).first;
    for (int i = 1; i < needed; ++i)
      if (auto c = store_.add_copy(job, shard, {peer}, now_ms); !c) return json{{"ok", false}, {"error", c.error().what()}};
    on_event_({{"event", "copies_made"}, {"job", job}, {"shard", shard}, {"copies", needed - 1}});
  }
  Group& g = it->second;
  Held h{task, peer, device, attempt, result};
  if (g.decided) return finish(job, h, same_result(*g.decided, result), now_ms, audit);
  g.held.push_back(std::move(h));
  // The largest set of agreeing copies decides once it is a majority of
  // those asked for (at least two).
  // Agreeing copies count once per peer.
  std::size_t best = 0, best_count = 0;
  for (std::size_t i = 0; i < g.held.size(); ++i) {
    std::vector<std::string> peers;
    for (const auto& o : g.held)
      if (same_result(g.held[i].result, o.result) && std::find(peers.begin(), peers.end(), o.peer) == peers.end())
        peers.push_back(o.peer);
    if (peers.size() > best_count) best = i, best_count = peers.size();
  }
  const std::size_t quorum = std::max<std::size_t>(2, static_cast<std::size_t>(g.needed) / 2 + 1);
  if (best_count >= quorum) {
    g.decided = g.held[best].result;
    quorum_decided(job, shard, g, r->shards);
    const TaskResult decided = *g.decided;
    if (auto rp = store_.retire_pending_copies(job, shard, "not needed: the shard's value is decided", now_ms); !rp)
      return json{{"ok", false}, {"error", rp.error().what()}};
    auto held = std::exchange(g.held, {});
    json mine;
    for (const auto& one : held) {  // finishing the job's last task forgets its groups: `g` is not used after this
      json answer = finish(job, one, same_result(decided, one.result), now_ms, audit);
      if (one.task == task && one.attempt == attempt) mine = answer;
    }
    return mine;
  }
  if (g.held.size() >= static_cast<std::size_t>(g.needed)) {
    // No majority among the copies asked for: one more, on a peer none of them ran on.
    g.needed += 1;
    std::vector<std::string> peers;
    for (const auto& one : g.held) peers.push_back(one.peer);
    if (auto c = store_.add_copy(job, shard, peers, now_ms); !c) return json{{"ok", false}, {"error", c.error().what()}};
    on_event_({{"event", "copies_disagree"}, {"job", job}, {"shard", shard}, {"copies", g.held.size()}});
  }
  return json{{"ok", true}, {"accepted", false}, {"held", true}, {"why", "held until a quorum of independent copies agrees"}};
}

json Replication::finish(const std::string& job, const Held& h, bool agrees, std::int64_t now_ms, const Audit& audit) {
  const std::int64_t exclude_after = store_.policy().exclude_after;
  if (agrees) {
    if (auto c = store_.record_check(h.device, h.task, h.peer, true, "", exclude_after, now_ms); !c)
      return {{"ok", false}, {"error", c.error().what()}};
    trust_.record(h.device, scheduling::Verdict::valid);
    (void)store_.record_verification(job, true, 0, 0);
    auto outcome = store_.complete(h.task, h.attempt, h.peer, h.result, now_ms);
    if (!outcome) return {{"ok", false}, {"error", outcome.error().what()}};
    if (outcome->job_finished) rules_.erase(job), groups_.erase(job);
    on_event_({{"event", outcome->accepted ? "task_done" : "result_ignored"}, {"task", h.task}, {"peer", h.peer},
               {"paid", format_credits(outcome->paid)}, {"why", outcome->why}, {"verified", "replication"}});
    return {{"ok", true}, {"accepted", outcome->accepted}, {"why", outcome->why}, {"paid", format_credits(outcome->paid)}};
  }
  const std::string why = "verification failed: the result differs from the one a majority of independent copies agree on";
  auto excluded = store_.record_check(h.device, h.task, h.peer, false, why, exclude_after, now_ms);
  if (!excluded) return {{"ok", false}, {"error", excluded.error().what()}};
  trust_.record(h.device, scheduling::Verdict::invalid);
  (void)store_.record_verification(job, false, 0, 0);
  if (audit) audit("pool_result", why, {{"task", h.task}, {"device", h.device}});
  if (*excluded) {
    on_event_({{"event", "device_excluded"}, {"device", h.device}, {"peer", h.peer}, {"reason", **excluded}});
    if (audit) audit("pool_device_excluded", **excluded, {{"device", h.device}});
  }
  // A losing copy is retired (the shard's value is decided); the original
  // shard's row, whose result the submitter reads, runs again on another
  // peer (record_check keeps this one off it).
  auto is_copy = store_.copy_of(h.task);
  if (!is_copy) return {{"ok", false}, {"error", is_copy.error().what()}};
  if (*is_copy) {
    auto retired = store_.retire_copy(h.task, why, now_ms);
    if (!retired) return {{"ok", false}, {"error", retired.error().what()}};
    if (*retired) rules_.erase(job), groups_.erase(job);
  } else if (auto f = store_.fail_attempt(h.task, h.attempt, h.peer, why, now_ms); !f) {
    return {{"ok", false}, {"error", f.error().what()}};
  }
  on_event_({{"event", "result_rejected"}, {"task", h.task}, {"peer", h.peer}, {"reason", why}});
  return {{"ok", true}, {"accepted", false}, {"why", why}};
}

std::set<std::string> Replication::held_tasks(const std::string& job) const {
  std::set<std::string> out;
  if (auto it = groups_.find(job); it != groups_.end())
    for (const auto& [shard, g] : it->second)
      for (const auto& h : g.held) out.insert(h.task);
  return out;
}

void Replication::forget_job(const std::string& job) {
  rules_.erase(job);
  groups_.erase(job);
}

std::int64_t Replication::copies(const std::string& job) {
  auto n = store_.copy_count(job);
  return n ? *n : 0;
}

}  // namespace runsnack::pool
