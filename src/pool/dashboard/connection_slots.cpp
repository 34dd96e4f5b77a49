#include "pool/dashboard/connection_slots.hpp"

namespace runsnack::pool::dashboard {

ConnectionSlots::Taken ConnectionSlots::take(const std::string& address_key) {
  Taken t;
  const std::size_t mine = held(address_key);
  if (mine >= per_address_) return t;
  if (slots_.size() >= total_) {
    // The address holding the most (of those with a connection that may go) gives way, unless that
    // would only swap places with the newcomer's address.
    const std::set<std::uint64_t>* most = nullptr;
    std::optional<std::uint64_t> victim;
    for (const auto& [key, held] : by_address_) {
      if (most && held.size() <= most->size()) continue;
      if (auto oldest = oldest_evictable(held)) {
        most = &held;
        victim = oldest;
      }
    }
    if (!most || most->size() < mine + 2) return t;
    t.evict = victim;
    release(*victim);
  }
  t.slot = next_++;
  slots_[*t.slot] = Slot{address_key, true};
  by_address_[address_key].insert(*t.slot);
  return t;
}

void ConnectionSlots::keep(std::uint64_t slot) {
  if (auto it = slots_.find(slot); it != slots_.end()) it->second.evictable = false;
}

void ConnectionSlots::release(std::uint64_t slot) {
  auto it = slots_.find(slot);
  if (it == slots_.end()) return;
  auto a = by_address_.find(it->second.address);
  if (a != by_address_.end()) {
    a->second.erase(slot);
    if (a->second.empty()) by_address_.erase(a);
  }
  slots_.erase(it);
}

std::size_t ConnectionSlots::held(const std::string& address_key) const {
  auto it = by_address_.find(address_key);
  return it == by_address_.end() ? 0 : it->second.size();
}

std::optional<std::uint64_t> ConnectionSlots::oldest_evictable(const std::set<std::uint64_t>& held) const {
  for (std::uint64_t slot : held)
    if (slots_.at(slot).evictable) return slot;
  return std::nullopt;
}

}  // namespace runsnack::pool::dashboard
