#include "sandbox/run_terms.hpp"

#include <cmath>
#include <cstdio>
#include <string>

namespace runsnack::exec {

namespace {

std::optional<std::uint64_t> count(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<std::int64_t>() < 0) return std::nullopt;
  return j[key].get<std::uint64_t>();
}

}  // namespace

RunTerms RunTerms::from_json(const nlohmann::json& j) {
  RunTerms t;
  if (!j.is_object()) return t;
  if (j.contains("timeout_s") && j["timeout_s"].is_number() && j["timeout_s"].get<double>() > 0)
    t.timeout_s = j["timeout_s"].get<double>();
  t.memory_bytes = count(j, "memory_bytes");
  if (auto n = count(j, "max_procs"); n && *n > 0) t.max_procs = *n;
  t.disk_quota_bytes = count(j, "disk_quota_bytes");
  if (auto n = count(j, "max_transfer_bytes"); n && *n > 0) t.max_transfer_bytes = *n;
  if (j.contains("network") && j["network"].is_boolean()) t.network = j["network"].get<bool>();
  return t;
}

nlohmann::json RunTerms::to_json() const {
  nlohmann::json j = {{"max_procs", max_procs}, {"network", network}};
  if (timeout_s) j["timeout_s"] = *timeout_s;
  if (memory_bytes) j["memory_bytes"] = *memory_bytes;
  if (disk_quota_bytes) j["disk_quota_bytes"] = *disk_quota_bytes;
  j["max_transfer_bytes"] = max_transfer_bytes;
  return j;
}

Result<std::uint64_t> parse_size(std::string_view text) {
  auto bad = [&] { return fail(errc::invalid_argument, "bad size '" + std::string(text) + "': expected e.g. 512M, 4G"); };
  std::string s(text);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    return bad();
  }
  if (!(v >= 0) || !std::isfinite(v)) return bad();
  std::string unit = s.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double mult = 1;
  if (unit.empty()) mult = 1;
  else if (unit == "K" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  else return bad();
  double bytes = v * mult;
  if (bytes > 9.0e18) return bad();
  return static_cast<std::uint64_t>(bytes);
}

std::string size_text(std::uint64_t bytes) {
  static const char* const kUnits[] = {"KB", "MB", "GB", "TB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit < 3) v /= 1024, ++unit;
  char buf[32];
  if (v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f %s", v, kUnits[unit]);
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string seconds_text(double seconds) {
  char buf[32];
  auto whole = [](double v) { return v == std::floor(v); };
  if (seconds >= 3600 && whole(seconds / 3600)) std::snprintf(buf, sizeof buf, "%.0f h", seconds / 3600);
  else if (seconds >= 120 && whole(seconds / 60)) std::snprintf(buf, sizeof buf, "%.0f min", seconds / 60);
  else if (whole(seconds)) std::snprintf(buf, sizeof buf, "%.0f s", seconds);
  else std::snprintf(buf, sizeof buf, "%.1f s", seconds);
  return buf;
}

std::string time_limit_text(double seconds) { return "the command was stopped at its " + seconds_text(seconds) + " time limit"; }

std::string limit_hit_text(bool memory, bool processes, bool ended_badly, const nlohmann::json& limits) {
  auto number = [&](const char* key) -> std::optional<std::uint64_t> {
    if (!limits.is_object() || !limits.contains(key) || !limits[key].is_number_unsigned()) return std::nullopt;
    return limits[key].get<std::uint64_t>();
  };
  std::string out;
  if (memory) {
    const auto bytes = number("memory_bytes");
    out = std::string(ended_badly ? "out of memory" : "a process of the command ran out of memory") +
          (bytes ? ": the link allows " + size_text(*bytes) + " per command" : std::string()) +
          " (the kernel killed " + (ended_badly ? "it" : "that process") + "; the provider can allow more: share --memory)";
  }
  if (processes) {
    const auto most = number("max_procs");
    out += std::string(out.empty() ? "" : "; ") + "the process limit was reached" +
           (most ? ": the link allows " + std::to_string(*most) + " processes per command" : std::string()) +
           " (a fork failed; the provider can allow more: share --max-procs)";
  }
  return out;
}

}  // namespace runsnack::exec
