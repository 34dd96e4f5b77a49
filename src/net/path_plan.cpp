#include "net/path_plan.hpp"

#include <algorithm>

namespace runsnack {

PathPlan::PathPlan(std::vector<Endpoint> link_candidates, Clock::time_point deadline)
    : dialed_(std::move(link_candidates)), deadline_(deadline) {}

std::vector<PathAction> PathPlan::start() {
  std::vector<PathAction> out;
  for (const auto& c : dialed_) out.push_back({PathAction::Kind::dial, c, {}});
  return out;
}

std::vector<PathAction> PathPlan::dial_new(const Endpoint& e) {
  if (std::find(dialed_.begin(), dialed_.end(), e) != dialed_.end()) return {};
  dialed_.push_back(e);
  return {{PathAction::Kind::dial, e, {}}};
}

std::vector<PathAction> PathPlan::introduced(const PathIntroduction& intro, Clock::time_point now) {
  answered_ = true;
  mapped_ = intro.mapped;
  if (won_ || now >= deadline_) return {};
  std::vector<PathAction> out;
  auto add = [&out](std::vector<PathAction> more) { out.insert(out.end(), more.begin(), more.end()); };
  for (const auto& c : intro.candidates) add(dial_new(c));
  if (intro.mapped) add(dial_new(*intro.mapped));
  if (intro.punch_to) out.push_back({PathAction::Kind::punch, *intro.punch_to, intro.punch_at});
  if (intro.relay && intro.punch_at + kRelayAfter < deadline_) relay_at_ = intro.punch_at + kRelayAfter;
  return out;
}

std::vector<PathAction> PathPlan::tick(Clock::time_point now) {
  if (!relay_at_ || now < *relay_at_) return {};
  relay_at_.reset();
  if (won_ || now >= deadline_) return {};
  return {{PathAction::Kind::open_relay, {}, {}}};
}

std::optional<PathPlan::Clock::time_point> PathPlan::next_wakeup() const {
  if (won_) return std::nullopt;
  return relay_at_;
}

std::string PathPlan::name(const Endpoint& winner, const std::string& path) const {
  return path == "direct" && mapped_ && *mapped_ == winner ? "mapped" : path;
}

}  // namespace runsnack
