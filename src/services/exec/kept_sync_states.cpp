#include "services/exec/kept_sync_states.hpp"

#include <vector>

namespace runsnack::exec {

namespace {
using Dropped = std::vector<std::unique_ptr<fs::SyncState>>;  // freed when it goes, after the lock
}  // namespace

std::unique_ptr<fs::SyncState> KeptSyncStates::take(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = kept_.find(key);
  if (it == kept_.end()) return nullptr;
  auto state = std::move(it->second.state);
  Dropped none;
  erase(it, none);
  return state;
}

bool KeptSyncStates::put_back(const std::string& consumer, const std::string& key,
                              std::unique_ptr<fs::SyncState> state, Clock::time_point now) {
  Dropped dropped;
  const std::size_t bytes = state ? state->memory_bytes() : 0;
  std::lock_guard lock(mutex_);
  if (auto it = kept_.find(key); it != kept_.end()) erase(it, dropped);
  drop_idle(now, dropped);
  if (!state || bytes > limits_.bytes_per_consumer || bytes > limits_.bytes_total) {
    dropped.push_back(std::move(state));
    return false;
  }
  bool room = true;
  while (room && bytes_of_locked(consumer) + bytes > limits_.bytes_per_consumer)
    room = drop_oldest(consumer, dropped);
  while (room && total_bytes_ + bytes > limits_.bytes_total) room = drop_oldest("", dropped);
  kept_[key] = Kept{consumer, std::move(state), bytes, now};
  consumer_bytes_[consumer] += bytes;
  total_bytes_ += bytes;
  return true;
}

void KeptSyncStates::drop(const std::string& key) {
  Dropped dropped;
  std::lock_guard lock(mutex_);
  if (auto it = kept_.find(key); it != kept_.end()) erase(it, dropped);
}

std::size_t KeptSyncStates::release_idle(Clock::time_point now) {
  Dropped dropped;
  std::lock_guard lock(mutex_);
  const std::size_t before = total_bytes_;
  drop_idle(now, dropped);
  return before - total_bytes_;
}

void KeptSyncStates::drop_idle(Clock::time_point now, Dropped& out) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (now - it->second.used >= limits_.idle) {
      erase(it++, out);
    } else {
      ++it;
    }
  }
}

std::optional<KeptSyncStates::Clock::time_point> KeptSyncStates::next_idle() const {
  std::lock_guard lock(mutex_);
  std::optional<Clock::time_point> oldest;
  for (const auto& [key, k] : kept_)
    if (!oldest || k.used < *oldest) oldest = k.used;
  if (oldest) *oldest += limits_.idle;
  return oldest;
}

std::size_t KeptSyncStates::bytes() const {
  std::lock_guard lock(mutex_);
  return total_bytes_;
}

std::size_t KeptSyncStates::bytes_of(const std::string& consumer) const {
  std::lock_guard lock(mutex_);
  return bytes_of_locked(consumer);
}

std::size_t KeptSyncStates::bytes_of_locked(const std::string& consumer) const {
  auto it = consumer_bytes_.find(consumer);
  return it == consumer_bytes_.end() ? 0 : it->second;
}

std::size_t KeptSyncStates::count() const {
  std::lock_guard lock(mutex_);
  return kept_.size();
}

bool KeptSyncStates::drop_oldest(const std::string& consumer, Dropped& out) {
  auto oldest = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it)
    if ((consumer.empty() || it->second.consumer == consumer) &&
        (oldest == kept_.end() || it->second.used < oldest->second.used))
      oldest = it;
  if (oldest == kept_.end()) return false;
  erase(oldest, out);
  return true;
}

void KeptSyncStates::erase(Map::iterator it, Dropped& out) {
  Kept& k = it->second;
  total_bytes_ -= k.bytes;
  if (auto c = consumer_bytes_.find(k.consumer); c != consumer_bytes_.end() && (c->second -= k.bytes) == 0)
    consumer_bytes_.erase(c);
  if (k.state) out.push_back(std::move(k.state));
  kept_.erase(it);
}

}  // namespace runsnack::exec
