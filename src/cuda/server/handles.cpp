#include "cuda/server/handles.hpp"

namespace runsnack::cuda {

std::uint64_t HandleTable::add(Kind kind, std::uint64_t value, std::uint64_t owner) {
  next_ += 16;
  entries_.emplace(next_, Entry{kind, value, owner});
  return next_;
}

std::optional<std::uint64_t> HandleTable::find_value(Kind kind, std::uint64_t value) const {
  for (const auto& [h, e] : entries_) {
    if (e.kind == kind && e.value == value) return h;
  }
  return std::nullopt;
}

const HandleTable::Entry* HandleTable::get(std::uint64_t handle, Kind kind) const {
  auto it = entries_.find(handle);
  if (it == entries_.end() || it->second.kind != kind) return nullptr;
  return &it->second;
}

bool HandleTable::remove(std::uint64_t handle, Kind kind) {
  auto it = entries_.find(handle);
  if (it == entries_.end() || it->second.kind != kind) return false;
  entries_.erase(it);
  return true;
}

std::vector<std::pair<std::uint64_t, HandleTable::Entry>> HandleTable::of_kind(Kind kind) const {
  std::vector<std::pair<std::uint64_t, Entry>> out;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->second.kind == kind) out.emplace_back(*it);
  }
  return out;
}

}  // namespace runsnack::cuda
