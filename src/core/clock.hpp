#pragma once
// The clock seam (docs/ARCHITECTURE.md section 13, rule 4): protocol and policy code takes a Clock so
// tests can step time; production uses SystemClock.

#include <chrono>
#include <cstdint>
#include <string>

namespace runsnack {

using TimePoint = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::system_clock::now(); }
  static const SystemClock& instance();
};

// A clock that only moves when told to. Not thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start) : now_(start) {}
  TimePoint now() const override { return now_; }
  void advance(std::chrono::system_clock::duration d) { now_ += d; }

 private:
  TimePoint now_;
};

// Seconds since the Unix epoch, the form times are stored in.
std::int64_t to_unix(TimePoint t);
TimePoint from_unix(std::int64_t seconds);
// RFC 3339 in UTC, e.g. "2026-11-29T21:36:30Z".
std::string rfc3339(TimePoint t);

}  // namespace runsnack
