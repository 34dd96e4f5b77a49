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

std::int64_t lease_cap(const LeaseRecord& record, std::int64_t first_leases) {
  return std::clamp<std::int64_t>(first_leases + record.completed - 2 * record.lost, 1, kMostLeases);
}

bool excluded_for_losses(const LeaseRecord& record) {
  return record.lost >= kLossesForgiven && record.lost > record.completed;
}

bool lease_expired(TimePoint deadline, TimePoint now) { return now >= deadline; }

TimePoint lease_deadline(TimePoint now, std::chrono::milliseconds lease) { return now + lease; }

}  // namespace runsnack::pool
