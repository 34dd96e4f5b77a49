#pragma once
// Human durations on the command line: "90s", "30m", "2h", "1d", "1h30m".

#include "core/error.hpp"

#include <chrono>
#include <string>
#include <string_view>

namespace runsnack {

Result<std::chrono::seconds> parse_duration(std::string_view text);
std::string format_duration(std::chrono::seconds d);  // "1h30m", "45s"

}  // namespace runsnack
