#include "pool/known_answers.hpp"

#include <algorithm>

namespace runsnack::pool {

KnownAnswers::KnownAnswers(std::uint64_t seed, std::size_t keep) : keep_(std::max<std::size_t>(keep, 1)), rng_(seed) {}

void KnownAnswers::learn(const LeasedTask& task, const TaskResult& answer, std::vector<std::string> peers) {
  for (auto& k : known_)
    if (k.task.id == task.id) return;  // already known
  known_.push_back({task, answer, std::move(peers), {}});
  if (known_.size() > keep_) known_.pop_front();
}

std::optional<LeasedTask> KnownAnswers::issue(const std::string& device, const std::string& peer) {
  if (outstanding(device)) return std::nullopt;
  // Of the answers this peer did not produce, one this device has not had
  // yet when there is one (a second try at the same task proves less).
  std::vector<std::size_t> fresh, seen;
  for (std::size_t i = 0; i < known_.size(); ++i) {
    const auto& k = known_[i];
    if (std::find(k.peers.begin(), k.peers.end(), peer) != k.peers.end()) continue;
    const bool had = std::find(k.given_to.begin(), k.given_to.end(), device) != k.given_to.end();
    (had ? seen : fresh).push_back(i);
  }
  const auto& pool = fresh.empty() ? seen : fresh;
  if (pool.empty()) return std::nullopt;
  auto pick = pool[static_cast<std::size_t>(rng_.uniform() * static_cast<double>(pool.size())) % pool.size()];
  Known& k = known_[pick];
  k.given_to.push_back(device);
  LeasedTask t = k.task;
  // Each issue is a new attempt of the task, as a retry would be.
  t.attempt += static_cast<std::int64_t>(k.given_to.size()) - 1;
  Key key{peer, t.id, t.attempt};
  out_[key] = {device, t.job, k.answer};
  out_by_device_[device] = key;
  ++issued_total_;
  return t;
}

bool KnownAnswers::outstanding(const std::string& device) const { return out_by_device_.count(device) > 0; }

std::optional<KnownAnswers::Issued> KnownAnswers::take(const std::string& peer, const std::string& task,
                                                       std::int64_t attempt) {
  auto it = out_.find({peer, task, attempt});
  if (it == out_.end()) return std::nullopt;
  Issued issued = std::move(it->second);
  out_.erase(it);
  out_by_device_.erase(issued.device);
  return issued;
}

void KnownAnswers::forget_peer(const std::string& peer) {
  for (auto it = out_.begin(); it != out_.end();) {
    if (it->first.peer == peer) {
      out_by_device_.erase(it->second.device);
      it = out_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace runsnack::pool
