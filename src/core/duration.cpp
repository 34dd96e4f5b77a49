#include "core/duration.hpp"

#include <cstdint>

namespace runsnack {

Result<std::chrono::seconds> parse_duration(std::string_view text) {
  auto bad = [&](const char* why) {
    return fail(errc::invalid_argument,
                "bad duration '" + std::string(text) + "': " + why + " (examples: 90s, 30m, 2h, 1d, 1h30m)");
  };
  if (text.empty()) return bad("empty");
  std::int64_t total = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    std::int64_t n = 0;
    std::size_t digits = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      n = n * 10 + (text[i] - '0');
      if (n > 10'000'000'000LL) return bad("too long");
      ++i, ++digits;
    }
    if (digits == 0) return bad("expected a number");
    if (i == text.size()) return bad("missing unit (s, m, h or d)");
    std::int64_t unit = 0;
    switch (text[i]) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      default: return bad("unknown unit");
    }
    ++i;
    total += n * unit;
    if (total > 10LL * 365 * 86400) return bad("longer than ten years");
  }
  if (total == 0) return bad("must be positive");
  return std::chrono::seconds(total);
}

std::string format_duration(std::chrono::seconds d) {
  std::int64_t s = d.count();
  if (s < 0) s = 0;
  std::string out;
  if (s >= 86400) out += std::to_string(s / 86400) + "d", s %= 86400;
  if (s >= 3600) out += std::to_string(s / 3600) + "h", s %= 3600;
  if (s >= 60) out += std::to_string(s / 60) + "m", s %= 60;
  if (s > 0 || out.empty()) out += std::to_string(s) + "s";
  return out;
}

}  // namespace runsnack
