#pragma once
// What a device can run, matched against what a job needs (JobPlan::needs):
// tasks go only to devices that can run them (docs/BROWSER-WORKERS.md). A
// native worker (kind cpu or gpu) runs every workload; a browser worker
// (webgpu, wasm) says which in register's device.runs, e.g.
// ["render", "matmul-seeded"] (a browser cannot read a job's .npy files).
// A device that lies about it only gets tasks it then fails.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool {

inline constexpr std::size_t kMaxDeviceRuns = 16;
inline constexpr std::size_t kMaxNeedsLength = 32;

struct DeviceRuns {
  bool everything = true;
  std::vector<std::string> needs;  // when not everything: [a-z0-9-]{1,32} each

  bool allows(std::string_view job_needs) const;
  // The store's claim filter (pool_store_tasks.cpp): "*" or ",a,b,".
  std::string sql_list() const;
};

// From register's `device` object of a device of `kind`; invalid_argument
// names what is wrong. Without "runs": everything for cpu and gpu, seeded
// matmul tiles for a browser (what the first browser page ran).
Result<DeviceRuns> parse_device_runs(std::string_view kind, const nlohmann::json& device);

bool is_browser_kind(std::string_view kind);

// register's device.max_task_seconds: the longest a task may take on this
// device (a phone's tab: seconds). The coordinator offers it no task it
// expects to run longer, and lets it hand back one that does (worker_ops.hpp
// "abandon"). Absent or null: no cap; otherwise an integer in [1, 86400].
inline constexpr std::int64_t kMaxTaskSecondsLimit = 86400;
Result<std::optional<std::int64_t>> parse_max_task_seconds(const nlohmann::json& device);

}  // namespace runsnack::pool
