#include "provider/admission_slots.hpp"

namespace runsnack {

AdmissionSlots::Taken AdmissionSlots::take(const std::string& address_key) {
  Taken t;
  auto& mine = by_address_[address_key];
  if (!mine.empty() && mine.size() >= per_address_) {
    t.evict = mine.begin()->first;
  } else if (slots_.size() >= total_) {
    // The address holding the most slots gives up its oldest.
    const std::map<std::uint64_t, bool>* most = nullptr;
    for (const auto& [key, held] : by_address_)
      if (!held.empty() && (!most || held.size() > most->size())) most = &held;
    if (most) t.evict = most->begin()->first;
  }
  if (t.evict) release(*t.evict);
  t.slot = next_++;
  slots_[t.slot] = address_key;
  by_address_[address_key][t.slot] = true;
  return t;
}

void AdmissionSlots::release(std::uint64_t slot) {
  auto it = slots_.find(slot);
  if (it == slots_.end()) return;
  auto a = by_address_.find(it->second);
  if (a != by_address_.end()) {
    a->second.erase(slot);
    if (a->second.empty()) by_address_.erase(a);
  }
  slots_.erase(it);
}

std::size_t AdmissionSlots::pending(const std::string& address_key) const {
  auto it = by_address_.find(address_key);
  return it == by_address_.end() ? 0 : it->second.size();
}

}  // namespace runsnack
