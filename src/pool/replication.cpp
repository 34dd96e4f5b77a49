#include "pool/replication.hpp"

#include "core/json_fields.hpp"
#include "pool/ledger_rules.hpp"
#include "pool/scheduling/network.hpp"
#include "pool/workload.hpp"
#include "pool/workloads/train_round.hpp"

#include <algorithm>

namespace runsnack::pool {

using json = nlohmann::json;

namespace {
json refuse(const Error& e) { return {{"ok", false}, {"error", e.what()}}; }
const json kHeld = {{"ok", true}, {"accepted", false}, {"held", true},
                    {"why", "held until a quorum of independent copies is decided"}};
}  // namespace

bool same_result(const TaskResult& a, const TaskResult& b) {
  return a.exit_code == b.exit_code && a.stdout_data == b.stdout_data && a.files == b.files;
}

Replication::Replication(PoolStore& store, std::function<void(const json&)> on_event, std::uint64_t seed,
                         KnownAnswers& known)
    : store_(store), on_event_(std::move(on_event)), trust_({}, seed), rng_(seed ^ 0x5107c4ecULL), known_(known) {}

void Replication::worker_network(const std::string& peer, const std::string& network) {
  networks_[peer] = network;
  online_[peer] = network;
}

void Replication::worker_left(const std::string& peer) {
  online_.erase(peer);
  for (auto& [job, groups] : groups_)
    for (auto& [shard, g] : groups)
      std::erase_if(g.claimed, [&](const auto& c) { return c.second == peer; });
}

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
  // exec's copies compare bit for bit; a train round's within its tolerance (workloads/train_round.hpp).
  if (auto def = store_.job_definition(job);
      def && (def->workload == "exec" || def->workload == kTrainRoundWorkload) && def->spec.is_object()) {
    JobRule j;
    j.replicas = int_or(def->spec, "replicas", 1);
    j.spot_check = number_or(def->spec, "spot_check", 0.0);
    j.shards = int_or(def->spec, "shards", std::int64_t{1});
    if (const Workload* w = find_workload(def->workload); w && (j.replicas > 1 || j.spot_check > 0)) {
      auto agreement = w->agreement(def->spec, def->input);
      if (agreement && *agreement) j.same = std::move(*agreement), j.exact = false;
      if (agreement) r = j;  // a rule that cannot be read (no weights): no copies, the checker refuses it
    }
  }
  return rules_[job] = r;
}

bool Replication::replicates(const std::string& job) { return rule(job).has_value(); }

std::set<std::string> Replication::used_networks(const Group& g, const std::string& except_copy) const {
  std::set<std::string> used;
  for (const auto& h : g.held) used.insert(network(h.peer));
  for (const auto& [copy, holder] : g.claimed)
    if (copy != except_copy) used.insert(network(holder));
  return used;
}

bool Replication::independent_device_online(const Group& g) const {
  std::set<std::string> peers;
  for (const auto& h : g.held) peers.insert(h.peer);
  for (const auto& [copy, holder] : g.claimed) peers.insert(holder);
  const auto nets = used_networks(g);
  return std::any_of(online_.begin(), online_.end(),
                     [&](const auto& o) { return !peers.count(o.first) && !nets.count(o.second); });
}

std::vector<Replication::Tally> Replication::tally(const Group& g) const {
  std::vector<Tally> out;
  for (std::size_t i = 0; i < g.held.size(); ++i) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const Tally& t) { return g.same(g.held[t.first].result, g.held[i].result); });
    if (it == out.end()) it = out.insert(out.end(), Tally{i, {}, {}});
    it->peers.insert(g.held[i].peer);
    it->networks.insert(network(g.held[i].peer));
  }
  return out;
}

std::size_t Replication::settle_by_peers(const Group& g) const {
  const auto tallies = tally(g);
  const Tally* best = &tallies.front();
  bool best_vouched = false;
  for (const auto& t : tallies) {
    auto v = vouched(t);
    const bool is_vouched = v && *v;
    if ((is_vouched && !best_vouched) || (is_vouched == best_vouched && t.peers.size() > best->peers.size()))
      best = &t, best_vouched = is_vouched;
  }
  return best->first;
}

Result<bool> Replication::vouched(const Tally& t) const {
  for (const auto& peer : t.peers) {
    auto v = store_.vouched_for(peer, kProvenChecks);
    if (!v) return v.error();
    if (*v) return true;
  }
  return false;
}

Result<std::set<std::string>> Replication::vouched_takers(const Group& g) const {
  // A few candidates are enough: one of them takes the copy.
  auto vouched = store_.vouched_online_peers(kProvenChecks, 64);
  if (!vouched) return vouched.error();
  std::set<std::string> out;
  for (const auto& peer : *vouched) {
    const bool used = std::any_of(g.held.begin(), g.held.end(), [&](const Held& h) { return h.peer == peer; }) ||
                      std::any_of(g.claimed.begin(), g.claimed.end(), [&](const auto& c) { return c.second == peer; });
    if (!used && online_.count(peer)) out.insert(peer);
  }
  return out;
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
      const auto used = used_networks(group, task.id);
      // A copy asked for because no two independent networks agreed is only
      // for a device on a network none of the shard's copies used.
      if (task.id == group.extra_copy && group.extra_needs_network && used.count(network(peer))) return false;
      if (task.id == group.extra_copy && group.extra_needs_vouched) {  // peers online since the copy was made
        auto v = store_.vouched_for(peer, kProvenChecks);
        if (!v) return v.error();
        if (!*v) return false;
      }
      if (scheduling::leave_copy_for_another_network(network(peer), {used.begin(), used.end()}, free_networks))
        return false;
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
  std::vector<std::string> nets;
  for (const auto& h : g.held) nets.push_back(network(h.peer));
  const auto n = static_cast<std::int64_t>(scheduling::distinct_networks(nets));
  auto [it, fresh] = job_networks_.emplace(job, n);
  if (!fresh) it->second = std::min(it->second, n);
  if (n < static_cast<std::int64_t>(g.held.size()))
    on_event_({{"event", "quorum_not_network_diverse"}, {"job", job}, {"shard", shard}, {"copies", g.held.size()},
               {"networks", n}});
  // A known answer only from independent parties who all had a proven record
  // before this quorum: a Sybil pair, or newcomers, cannot plant one.
  if (!g.verified || !g.exact) return;  // a known answer is compared bit for bit
  std::vector<KnownAnswers::Party> producers;
  for (const auto& h : g.held) {
    if (!g.same(*g.decided, h.result)) continue;
    auto valid = store_.vouched_for(h.peer, kProvenChecks);
    if (!valid || !*valid) return;
    producers.push_back({h.peer, h.device, network(h.peer)});
  }
  for (const auto& h : g.held)  // peers that ran it otherwise never get it either
    if (!g.same(*g.decided, h.result)) producers.push_back({h.peer, "", network(h.peer)});
  for (const auto& [copy, holder] : g.claimed) producers.push_back({holder, "", network(holder)});
  auto def = store_.job_definition(job);
  if (!def) return;
  // The shard's original task, handed out again later as a known-answer
  // task: the next attempt after the last one seen.
  LeasedTask t;
  t.id = job + "." + std::to_string(shard);
  t.job = job, t.shard = shard, t.shards = shards, t.workload = def->workload, t.needs = def->needs,
  t.spec = def->spec;
  t.attempt = 1;
  for (const auto& h : g.held)
    if (h.task == t.id) t.attempt = std::max(t.attempt, h.attempt);
  t.attempt += 1;
  known_.learn(t, *g.decided, std::move(producers));
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
  trust_.device_seen(device, {peer, network(peer)});
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
    it = groups.emplace(shard, Group{}).first;
    it->second.same = r->same, it->second.exact = r->exact;
    it->second.needed = needed;
    for (int i = 1; i < needed; ++i)
      if (auto c = store_.add_copy(job, shard, {peer}, now_ms); !c) return refuse(c.error());
    on_event_({{"event", "copies_made"}, {"job", job}, {"shard", shard}, {"copies", needed - 1}});
  }
  Group& g = it->second;
  Held h{task, peer, device, attempt, result, now_ms};
  if (g.decided) return finish(job, h, g.same(*g.decided, result), g.verified, now_ms, audit);
  g.claimed.erase(task);
  if (task == g.extra_copy) g.extra_copy.clear();
  g.held.push_back(std::move(h));
  // Independent parties only: a value's support is the networks agreeing on
  // it (one network counts once, whatever its keys); it is verified with a
  // majority of those asked for (at least two) and more than any other value.
  const auto tallies = tally(g);
  const Tally* best = &tallies.front();
  for (const auto& t : tallies)
    if (t.networks.size() > best->networks.size() ||
        (t.networks.size() == best->networks.size() && t.peers.size() > best->peers.size()))
      best = &t;
  const bool unique = std::none_of(tallies.begin(), tallies.end(), [&](const Tally& t) {
    return &t != best && t.networks.size() >= best->networks.size();
  });
  const std::size_t quorum = std::max<std::size_t>(2, static_cast<std::size_t>(g.needed) / 2 + 1);
  if (unique && best->networks.size() >= quorum) {
    auto v = vouched(*best);
    if (!v) return refuse(v.error());
    if (*v) return decide(job, shard, g, best->first, true, task, attempt, now_ms, audit);
    // Independent, but no party vouched for: the copies still out, then one
    // for a vouched-for device while one is online.
    if (g.held.size() < static_cast<std::size_t>(g.needed)) return kHeld;
    if (g.extra < kMaxExtraCopies) {
      auto takers = vouched_takers(g);
      if (!takers) return refuse(takers.error());
      if (!takers->empty()) {
        std::vector<std::string> avoid;
        for (const auto& one : g.held) avoid.push_back(one.peer);
        for (const auto& [copy, holder] : g.claimed) avoid.push_back(holder);
        for (const auto& [p, net] : online_)
          if (!takers->count(p)) avoid.push_back(p);
        g.untaken_since = 0;
        if (auto failed = add_extra_copy(job, shard, g, std::move(avoid), CopyFor::a_vouched_peer, now_ms)) return failed;
        return kHeld;
      }
    }
    return decide(job, shard, g, settle_by_peers(g), false, task, attempt, now_ms, audit);
  }
  if (g.held.size() >= static_cast<std::size_t>(g.needed))
    if (auto answer = extend_or_settle(job, shard, g, task, attempt, now_ms, audit)) return answer;
  return kHeld;
}

std::optional<json> Replication::extend_or_settle(const std::string& job, std::int64_t shard, Group& g,
                                                  const std::string& task, std::int64_t attempt, std::int64_t now_ms,
                                                  const Audit& audit) {
  std::vector<std::string> avoid;
  for (const auto& one : g.held) avoid.push_back(one.peer);
  for (const auto& [copy, holder] : g.claimed) avoid.push_back(holder);
  g.untaken_since = 0;  // a new copy: the tick's wait starts again when nobody online may take it
  if (g.extra < kMaxExtraCopies && independent_device_online(g))
    return add_extra_copy(job, shard, g, std::move(avoid), CopyFor::another_network, now_ms);
  // Nobody independent to ask now.
  const auto tallies = tally(g);
  std::size_t top = 0, tied = 0;
  for (const auto& t : tallies) top = std::max(top, t.peers.size());
  for (const auto& t : tallies) tied += t.peers.size() == top;
  const bool another_peer = std::any_of(online_.begin(), online_.end(), [&](const auto& o) {
    return std::find(avoid.begin(), avoid.end(), o.first) == avoid.end();
  });
  if (tied > 1 && g.extra < kMaxExtraCopies && another_peer)  // a tie among peers: one more peer breaks it
    return add_extra_copy(job, shard, g, std::move(avoid), CopyFor::another_peer, now_ms);
  if (g.extra < kMaxExtraCopies && store_.policy().independent_wait_ms > 0) {
    // One may be on its way (a worker still starting, reconnecting): the
    // copy waits for one, and the maintenance tick delivers the shard
    // unverified if none comes in time.
    g.untaken_since = now_ms;
    return add_extra_copy(job, shard, g, std::move(avoid), CopyFor::another_network, now_ms);
  }
  // The pool cannot verify this shard.
  return decide(job, shard, g, settle_by_peers(g), false, task, attempt, now_ms, audit);
}

std::optional<json> Replication::add_extra_copy(const std::string& job, std::int64_t shard, Group& g,
                                                std::vector<std::string> avoid, CopyFor who, std::int64_t now_ms) {
  const bool needs_network = who == CopyFor::another_network;
  if (needs_network) {  // the online peers on networks the copies used may not take it
    const auto used = used_networks(g);
    for (const auto& [p, net] : online_)
      if (used.count(net)) avoid.push_back(p);
  }
  auto c = store_.add_copy(job, shard, avoid, now_ms);
  if (!c) return refuse(c.error());
  g.needed += 1, g.extra += 1, g.extra_copy = *c, g.extra_needs_network = needs_network;
  g.extra_needs_vouched = who == CopyFor::a_vouched_peer;
  const char* wants = needs_network            ? "a copy on another network"
                      : g.extra_needs_vouched ? "a copy on a vouched-for device"
                                              : "a copy on another peer";
  json event = {{"event", "copies_disagree"}, {"job", job}, {"shard", shard}, {"copies", g.held.size()},
                {"wants", wants}};
  if (g.untaken_since == now_ms) event["waits_s"] = store_.policy().independent_wait_ms / 1000.0;
  on_event_(event);
  return std::nullopt;
}

json Replication::decide(const std::string& job, std::int64_t shard, Group& g, std::size_t winner, bool verified,
                         const std::string& task, std::int64_t attempt, std::int64_t now_ms, const Audit& audit) {
  g.decided = g.held[winner].result;
  g.verified = verified;
  const TaskResult decided = *g.decided;
  quorum_decided(job, shard, g, rules_[job] ? rules_[job]->shards : 0);
  if (!verified) {
    if (auto u = store_.record_unverified(job); !u) return refuse(u.error());
    std::set<std::string> peers;
    for (const auto& h : g.held) peers.insert(h.peer);
    on_event_({{"event", "quorum_unverified"}, {"job", job}, {"shard", shard}, {"copies", g.held.size()},
               {"peers", peers.size()}, {"networks", used_networks(g).size()}});
  }
  if (auto rp = store_.retire_pending_copies(job, shard, "not needed: the shard's value is decided", now_ms); !rp)
    return refuse(rp.error());
  auto held = std::exchange(g.held, {});
  const Agreement same = g.same;
  json mine = kHeld;
  for (const auto& one : held) {  // finishing the job's last task forgets its groups: `g` is not used after this
    json answer = finish(job, one, same(decided, one.result), verified, now_ms, audit);
    if (one.task == task && one.attempt == attempt) mine = answer;
  }
  return mine;
}

void Replication::tick(std::int64_t now_ms, const Audit& audit) {
  // A copy asked for that nobody online may take, for the policy's wait:
  // settle unverified.
  std::vector<std::pair<std::string, std::int64_t>> stuck;
  for (auto& [job, groups] : groups_)
    for (auto& [shard, g] : groups) {
      if (g.decided || g.extra_copy.empty() || g.claimed.count(g.extra_copy) || g.held.empty()) continue;
      bool takers = false;
      if (g.extra_needs_network) {
        takers = independent_device_online(g);
      } else if (g.extra_needs_vouched) {
        auto vouched = vouched_takers(g);
        takers = !vouched || !vouched->empty();  // a store error is no reason to give up on the copy
      } else {
        std::set<std::string> peers;
        for (const auto& h : g.held) peers.insert(h.peer);
        takers = std::any_of(online_.begin(), online_.end(), [&](const auto& o) { return !peers.count(o.first); });
      }
      if (takers) {
        g.untaken_since = 0;
        continue;
      }
      if (g.untaken_since == 0) g.untaken_since = now_ms;
      if (now_ms - g.untaken_since >= store_.policy().independent_wait_ms) stuck.emplace_back(job, shard);
    }
  for (const auto& [job, shard] : stuck) {
    auto gi = groups_.find(job);
    if (gi == groups_.end()) continue;
    auto it = gi->second.find(shard);
    if (it == gi->second.end() || it->second.decided) continue;
    it->second.extra_copy.clear();
    decide(job, shard, it->second, settle_by_peers(it->second), false, "", 0, now_ms, audit);
  }
}

json Replication::finish(const std::string& job, const Held& h, bool agrees, bool verified, std::int64_t now_ms,
                         const Audit& audit) {
  const std::int64_t exclude_after = store_.policy().exclude_after;
  auto is_copy = store_.copy_of(h.task);
  if (!is_copy) return refuse(is_copy.error());
  if (agrees) {
    if (verified) {
      if (auto c = store_.record_check(h.device, h.task, h.peer, true, "", exclude_after, now_ms); !c) return refuse(c.error());
      trust_.record(h.device, scheduling::Verdict::valid);
      (void)store_.record_verification(job, true, 0, 0);
    }
    if (h.result.exit_code != 0) {
      // Exit status is a result: the shard's decided value is a failure. Not paid.
      const std::string why = "exit code " + std::to_string(h.result.exit_code);
      bool finished = false;
      if (*is_copy) {
        auto retired = store_.retire_copy(h.task, "the shard's decided result is " + why, now_ms);
        if (!retired) return refuse(retired.error());
        finished = *retired;
      } else {
        auto f = store_.shard_failed(h.task, h.attempt, h.peer, h.result.exit_code, h.result.stderr_tail, true, now_ms);
        if (!f) return refuse(f.error());
        finished = f->job_finished;
        on_event_({{"event", "task_failed"}, {"task", h.task}, {"peer", h.peer}, {"exit_code", h.result.exit_code},
                   {"reason", why}});
      }
      if (finished) rules_.erase(job), groups_.erase(job);
      return {{"ok", true}, {"accepted", false}, {"failed", true}, {"why", why}};
    }
    auto outcome = store_.complete(h.task, h.attempt, h.peer, h.result, now_ms, h.arrived_ms);
    if (!outcome) return refuse(outcome.error());
    if (outcome->job_finished) rules_.erase(job), groups_.erase(job);
    on_event_({{"event", outcome->accepted ? "task_done" : "result_ignored"}, {"task", h.task}, {"peer", h.peer},
               {"paid", format_credits(outcome->paid)}, {"why", outcome->why},
               {"verified", verified ? "replication" : "unverified"}});
    return {{"ok", true}, {"accepted", outcome->accepted}, {"why", outcome->why}, {"paid", format_credits(outcome->paid)}};
  }
  std::string why;
  if (verified) {
    why = "verification failed: the result differs from the one a majority of independent copies agree on";
    auto excluded = store_.record_check(h.device, h.task, h.peer, false, why, exclude_after, now_ms);
    if (!excluded) return refuse(excluded.error());
    trust_.record(h.device, scheduling::Verdict::invalid);
    (void)store_.record_verification(job, false, 0, 0);
    if (audit) audit("pool_result", why, {{"task", h.task}, {"device", h.device}});
    if (*excluded) {
      on_event_({{"event", "device_excluded"}, {"device", h.device}, {"peer", h.peer}, {"reason", **excluded}});
      if (audit) audit("pool_device_excluded", **excluded, {{"device", h.device}});
    }
  } else {
    // Not a verdict on anyone: the value kept has no independent quorum either.
    why = "the result differs from the one kept for the shard (unverified: no quorum of independent copies)";
    if (auto a = store_.avoid_peer(h.task, h.peer, why, now_ms); !a) return refuse(a.error());
  }
  // A losing copy is retired (the shard's value is decided); the original
  // shard's row, whose result the submitter reads, runs again on another peer.
  if (*is_copy) {
    auto retired = store_.retire_copy(h.task, why, now_ms);
    if (!retired) return refuse(retired.error());
    if (*retired) rules_.erase(job), groups_.erase(job);
  } else if (auto f = store_.fail_attempt(h.task, h.attempt, h.peer, why, now_ms); !f) {
    return refuse(f.error());
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

std::int64_t Replication::held_results(const std::string& peer) const {
  std::int64_t n = 0;
  for (const auto& [job, groups] : groups_)
    for (const auto& [shard, g] : groups)
      n += std::count_if(g.held.begin(), g.held.end(), [&](const Held& h) { return h.peer == peer; });
  return n;
}

std::int64_t Replication::held_results_on_network(const std::string& net) const {
  std::int64_t n = 0;
  for (const auto& [job, groups] : groups_)
    for (const auto& [shard, g] : groups)
      n += std::count_if(g.held.begin(), g.held.end(), [&](const Held& h) { return network(h.peer) == net; });
  return n;
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
