#pragma once
// A token bucket for a byte rate, fed with the current time (no clock inside):
// `reserve(n, now)` takes n bytes' worth of tokens, going into debt if needed,
// and says how long the caller must wait before sending them. Debt makes every
// later caller wait too, so several connections sharing one bucket (one per
// session) share the rate. The burst bounds how far ahead of the rate a sender
// can get after being idle.
//
// Not thread-safe; one executor.

#include <chrono>
#include <cstdint>

namespace runsnack {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  TokenBucket(std::int64_t bytes_per_s, std::int64_t burst_bytes, Clock::time_point now)
      : rate_(static_cast<double>(bytes_per_s)), burst_(static_cast<double>(burst_bytes)), tokens_(burst_), last_(now) {}

  // The largest piece a caller should send at once (keeps the rate smooth).
  std::int64_t burst() const { return static_cast<std::int64_t>(burst_); }
  std::int64_t rate() const { return static_cast<std::int64_t>(rate_); }

  // Takes `bytes` tokens; returns how long to wait before sending (zero when
  // they were available).
  Clock::duration reserve(std::int64_t bytes, Clock::time_point now);

 private:
  void refill(Clock::time_point now);

  double rate_;
  double burst_;
  double tokens_;  // may go negative: debt that later reservations wait out
  Clock::time_point last_;
};

// A burst that is small against a second of traffic, so that a 5 s transfer
// stays within a few percent of the rate, but at least one socket read.
std::int64_t default_burst(std::int64_t bytes_per_s);

}  // namespace runsnack
