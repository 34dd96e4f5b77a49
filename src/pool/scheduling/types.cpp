#include "pool/scheduling/types.hpp"

namespace runsnack::pool::scheduling {

std::optional<Preference> parse_preference(std::string_view s) {
  if (s == "fast") return Preference::fast;
  if (s == "cheap") return Preference::cheap;
  if (s == "balanced") return Preference::balanced;
  return std::nullopt;
}

std::string_view to_string(Preference p) {
  switch (p) {
    case Preference::fast: return "fast";
    case Preference::cheap: return "cheap";
    case Preference::balanced: return "balanced";
  }
  return "balanced";
}

std::optional<Outcome> parse_outcome(std::string_view s) {
  if (s == "ok") return Outcome::ok;
  if (s == "failed") return Outcome::failed;
  if (s == "invalid") return Outcome::invalid;
  if (s == "lost") return Outcome::lost;
  if (s == "cancelled") return Outcome::cancelled;
  return std::nullopt;
}

std::string_view to_string(Outcome o) {
  switch (o) {
    case Outcome::ok: return "ok";
    case Outcome::failed: return "failed";
    case Outcome::invalid: return "invalid";
    case Outcome::lost: return "lost";
    case Outcome::cancelled: return "cancelled";
  }
  return "ok";
}

}  // namespace runsnack::pool::scheduling
