#include "pool/scheduler.hpp"

#include <algorithm>

namespace runsnack::pool {

std::vector<std::string> assign_fastest_first(std::vector<WaitingDevice> waiting, std::size_t pending) {
  std::sort(waiting.begin(), waiting.end(), [](const WaitingDevice& a, const WaitingDevice& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.since != b.since) return a.since < b.since;
    return a.id < b.id;
  });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < waiting.size() && i < pending; ++i) out.push_back(waiting[i].id);
  return out;
}

bool may_claim(const std::string& device, const std::vector<WaitingDevice>& waiting, std::size_t pending) {
  auto chosen = assign_fastest_first(waiting, pending);
  return std::find(chosen.begin(), chosen.end(), device) != chosen.end();
}

RetryDecision after_lost_attempt(int attempts, int max_attempts) {
  return attempts >= max_attempts ? RetryDecision::fail : RetryDecision::requeue;
}

bool lease_expired(TimePoint deadline, TimePoint now) { return now >= deadline; }

TimePoint lease_deadline(TimePoint now, std::chrono::milliseconds lease) { return now + lease; }

}  // namespace runsnack::pool
