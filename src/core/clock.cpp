#include "core/clock.hpp"

#include <ctime>

namespace runsnack {

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

std::int64_t to_unix(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

TimePoint from_unix(std::int64_t seconds) { return TimePoint(std::chrono::seconds(seconds)); }

std::string rfc3339(TimePoint t) {
  std::time_t tt = static_cast<std::time_t>(to_unix(t));
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace runsnack
