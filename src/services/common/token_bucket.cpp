#include "services/common/token_bucket.hpp"

#include <algorithm>

namespace runsnack {

void TokenBucket::refill(Clock::time_point now) {
  if (now <= last_) return;
  double seconds = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(burst_, tokens_ + seconds * rate_);
  last_ = now;
}

TokenBucket::Clock::duration TokenBucket::reserve(std::int64_t bytes, Clock::time_point now) {
  refill(now);
  tokens_ -= static_cast<double>(bytes);
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(-tokens_ / rate_));
}

std::int64_t default_burst(std::int64_t bytes_per_s) {
  return std::clamp<std::int64_t>(bytes_per_s / 50, 4096, 256 * 1024);
}

}  // namespace runsnack
