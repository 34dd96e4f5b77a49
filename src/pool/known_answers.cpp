#include "pool/known_answers.hpp"

#include "pool/replication.hpp"

#include <algorithm>

namespace runsnack::pool {

namespace {
bool has_peer(const std::vector<KnownAnswers::Party>& parties, const std::string& peer) {
  return std::any_of(parties.begin(), parties.end(), [&](const auto& p) { return p.peer == peer; });
}
}  // namespace

KnownAnswers::KnownAnswers(std::uint64_t seed, std::size_t keep) : keep_(std::max<std::size_t>(keep, 1)), rng_(seed) {}

void KnownAnswers::learn(const LeasedTask& task, const TaskResult& answer, std::vector<Party> producers) {
  if (find(task.id)) return;  // already known
  known_.push_back({task, answer, std::move(producers), {}, {}, false});
  if (known_.size() > keep_) known_.pop_front();
}

KnownAnswers::Known* KnownAnswers::find(const std::string& task) {
  for (auto& k : known_)
    if (k.task.id == task) return &k;
  return nullptr;
}

LeasedTask KnownAnswers::hand_out(Known& k, const std::string& device, const std::string& peer, bool tiebreak) {
  k.given_to.push_back(device);
  LeasedTask t = k.task;
  // Each issue is a new attempt of the task, as a retry would be.
  t.attempt += static_cast<std::int64_t>(k.given_to.size()) - 1;
  Key key{peer, t.id, t.attempt};
  out_[key] = {device, t.job, k.answer, tiebreak};
  out_by_device_[device] = key;
  ++issued_total_;
  return t;
}

std::optional<LeasedTask> KnownAnswers::issue(const std::string& device, const std::string& peer, const MayRun& may_run) {
  if (outstanding(device)) return std::nullopt;
  // Of the answers this peer did not produce and this device did not
  // dispute, one this device has not had yet when there is one (a second
  // try at the same task proves less).
  std::vector<std::size_t> fresh, seen;
  for (std::size_t i = 0; i < known_.size(); ++i) {
    const auto& k = known_[i];
    if (has_peer(k.producers, peer) || (may_run && !may_run(k.task))) continue;
    if (std::any_of(k.disputes.begin(), k.disputes.end(), [&](const auto& d) { return d.first.device == device; }))
      continue;
    const bool had = std::find(k.given_to.begin(), k.given_to.end(), device) != k.given_to.end();
    (had ? seen : fresh).push_back(i);
  }
  const auto& pool = fresh.empty() ? seen : fresh;
  if (pool.empty()) return std::nullopt;
  auto pick = pool[static_cast<std::size_t>(rng_.uniform() * static_cast<double>(pool.size())) % pool.size()];
  return hand_out(known_[pick], device, peer, false);
}

std::optional<LeasedTask> KnownAnswers::issue_tiebreak(const std::string& device, const std::string& peer,
                                                       const std::string& network, const MayRun& may_run) {
  if (outstanding(device)) return std::nullopt;
  for (auto& k : known_) {
    if (k.disputes.empty() || k.tiebreak_out || (may_run && !may_run(k.task))) continue;
    bool independent = !has_peer(k.producers, peer);
    for (const auto& p : k.producers) independent = independent && p.network != network;
    for (const auto& [d, r] : k.disputes) independent = independent && d.peer != peer && d.network != network;
    if (!independent) continue;
    k.tiebreak_out = true;
    return hand_out(k, device, peer, true);
  }
  return std::nullopt;
}

bool KnownAnswers::outstanding(const std::string& device) const { return out_by_device_.count(device) > 0; }

std::size_t KnownAnswers::open_disputes() const {
  std::size_t n = 0;
  for (const auto& k : known_) n += k.disputes.size();
  return n;
}

std::optional<KnownAnswers::Issued> KnownAnswers::take(const std::string& peer, const std::string& task,
                                                       std::int64_t attempt) {
  auto it = out_.find({peer, task, attempt});
  if (it == out_.end()) return std::nullopt;
  Issued issued = std::move(it->second);
  out_.erase(it);
  out_by_device_.erase(issued.device);
  if (issued.tiebreak)
    if (Known* k = find(task)) k->tiebreak_out = false;
  return issued;
}

void KnownAnswers::dispute(const std::string& task, const Party& disputer, const TaskResult& result) {
  Known* k = find(task);
  if (!k) return;
  if (k->disputes.size() + 1 >= kMaxDisputes) {
    // So contested that it proves nothing either way (and what it holds stays bounded): dropped, nobody judged.
    std::erase_if(out_, [&](const auto& o) {
      if (o.first.task != task) return false;
      out_by_device_.erase(o.second.device);
      return true;
    });
    known_.erase(std::find_if(known_.begin(), known_.end(), [&](const Known& x) { return &x == k; }));
    return;
  }
  k->disputes.push_back({disputer, result});
}

KnownAnswers::Resolution KnownAnswers::resolve(const std::string& task, const TaskResult& result) {
  Resolution out;
  Known* k = find(task);
  if (!k) return out;  // forgotten meanwhile (the newest answers are kept)
  if (same_result(k->answer, result)) {
    out.tiebreak_valid = true;
    for (const auto& [d, r] : k->disputes) out.wrong.push_back(d);
    k->disputes.clear();
    return out;
  }
  for (const auto& [d, r] : k->disputes)
    if (same_result(r, result)) out.right.push_back(d);
  if (!out.right.empty()) {
    // Two independent parties against the answer: its producers were wrong.
    out.tiebreak_valid = true;
    out.wrong = k->producers;
    for (const auto& [d, r] : k->disputes)
      if (!same_result(r, result)) out.wrong.push_back(d);
  }
  out.answer_dropped = true;
  known_.erase(std::find_if(known_.begin(), known_.end(), [&](const Known& x) { return &x == k; }));
  return out;
}

void KnownAnswers::forget_peer(const std::string& peer) {
  for (auto it = out_.begin(); it != out_.end();) {
    if (it->first.peer == peer) {
      out_by_device_.erase(it->second.device);
      if (it->second.tiebreak)
        if (Known* k = find(it->first.task)) k->tiebreak_out = false;
      it = out_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace runsnack::pool
