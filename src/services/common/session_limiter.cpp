#include "services/common/session_limiter.hpp"

namespace runsnack {

SessionSlot::~SessionSlot() {
  if (owner_) owner_->release(session_);
}

std::optional<SessionSlot> SessionLimiter::acquire(const std::string& session, std::optional<std::int64_t> max_open,
                                                   std::optional<std::int64_t> bytes_per_s) {
  auto it = sessions_.find(session);
  const std::int64_t open = it == sessions_.end() ? 0 : it->second.open;
  if (max_open && open >= *max_open) return std::nullopt;
  State& state = it == sessions_.end() ? sessions_[session] : it->second;
  ++state.open;
  if (bytes_per_s && !state.bucket)
    state.bucket = std::make_shared<TokenBucket>(*bytes_per_s, default_burst(*bytes_per_s), TokenBucket::Clock::now());
  return SessionSlot(shared_from_this(), session, state.bucket);
}

std::int64_t SessionLimiter::open(const std::string& session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second.open;
}

void SessionLimiter::release(const std::string& session) {
  auto it = sessions_.find(session);
  if (it != sessions_.end() && --it->second.open <= 0) sessions_.erase(it);
}

}  // namespace runsnack
