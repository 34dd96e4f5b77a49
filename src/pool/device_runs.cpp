#include "pool/device_runs.hpp"

#include <algorithm>

namespace runsnack::pool {

bool is_browser_kind(std::string_view kind) { return kind == "webgpu" || kind == "wasm"; }

bool DeviceRuns::allows(std::string_view job_needs) const {
  if (everything) return true;
  return !job_needs.empty() && std::find(needs.begin(), needs.end(), job_needs) != needs.end();
}

std::string DeviceRuns::sql_list() const {
  if (everything) return "*";
  std::string out = ",";
  for (const auto& n : needs) out += n + ",";
  return out;
}

Result<DeviceRuns> parse_device_runs(std::string_view kind, const nlohmann::json& device) {
  if (!device.is_object() || !device.contains("runs")) {
    if (is_browser_kind(kind)) return DeviceRuns{false, {"matmul-seeded"}};
    return DeviceRuns{};
  }
  const auto& runs = device["runs"];
  if (!runs.is_array() || runs.empty() || runs.size() > kMaxDeviceRuns)
    return fail(errc::invalid_argument, "device.runs must list 1.." + std::to_string(kMaxDeviceRuns) + " workloads");
  DeviceRuns out{false, {}};
  for (const auto& r : runs) {
    if (!r.is_string()) return fail(errc::invalid_argument, "device.runs holds a non-string");
    const auto& s = r.get_ref<const std::string&>();
    const bool word = !s.empty() && s.size() <= kMaxNeedsLength &&
                      std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
    if (!word) return fail(errc::invalid_argument, "device.runs: a workload is 1.." + std::to_string(kMaxNeedsLength) + " of a-z 0-9 -");
    if (std::find(out.needs.begin(), out.needs.end(), s) == out.needs.end()) out.needs.push_back(s);
  }
  return out;
}

Result<std::optional<std::int64_t>> parse_max_task_seconds(const nlohmann::json& device) {
  if (!device.is_object() || !device.contains("max_task_seconds") || device["max_task_seconds"].is_null())
    return std::optional<std::int64_t>{};
  const auto& v = device["max_task_seconds"];
  const std::string range = "1.." + std::to_string(kMaxTaskSecondsLimit);
  if (!v.is_number_integer()) return fail(errc::invalid_argument, "device.max_task_seconds must be a whole number of seconds in " + range);
  // Unsigned JSON integers past int64 read as negative here: refused with the rest.
  const std::int64_t s = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxTaskSecondsLimit)
                             ? kMaxTaskSecondsLimit + 1
                             : v.get<std::int64_t>();
  if (s < 1 || s > kMaxTaskSecondsLimit) return fail(errc::invalid_argument, "device.max_task_seconds must be in " + range);
  return std::optional<std::int64_t>(s);
}

}  // namespace runsnack::pool
