#pragma once
// The limits a grant puts on run / shell / cp, stored in grant.terms["run"]
// (no schema change): {"timeout_s":N, "memory_bytes":N, "max_procs":N,
// "disk_quota_bytes":N, "max_transfer_bytes":N, "network":bool}. Absent keys
// take the defaults below. Pure.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace runsnack::exec {

// A fork bomb stops here even when the grant says nothing.
inline constexpr std::uint64_t kDefaultMaxProcs = 1024;
// What one pull or `cp` from the workspace may send (file data; holes of sparse files do not count).
inline constexpr std::uint64_t kDefaultMaxTransferBytes = std::uint64_t(10) << 30;

struct RunTerms {
  std::optional<double> timeout_s;
  std::optional<std::uint64_t> memory_bytes;
  std::uint64_t max_procs = kDefaultMaxProcs;
  std::optional<std::uint64_t> disk_quota_bytes;
  std::uint64_t max_transfer_bytes = kDefaultMaxTransferBytes;
  bool network = false;

  static RunTerms from_json(const nlohmann::json& terms);  // bad fields are ignored (defaults)
  nlohmann::json to_json() const;
};

// "512M", "4G", "1.5GiB", "1000" (bytes) -> bytes (K, M, G, T are powers of 1024).
Result<std::uint64_t> parse_size(std::string_view text);
// Bytes in parse_size's units, for messages: 52428800 -> "50 MB", 1536 -> "1.5 KB", 100 -> "100 bytes".
std::string size_text(std::uint64_t bytes);
// Seconds for messages: 3 -> "3 s", 0.5 -> "0.5 s", 600 -> "10 min", 7200 -> "2 h".
std::string seconds_text(double seconds);
// Why a command ended at its time limit: "the command was stopped at its 3 s time limit".
std::string time_limit_text(double seconds);
// Why a command was stopped by a limit of its cgroup, from what the cgroup
// saw (Cgroup::limits_hit) and the limits it ran under (launch.hpp's
// "memory_bytes", "max_procs"): "out of memory: the link allows 200 MB per
// command (its process was killed)", "the process limit was reached: ...".
// `ended_badly`: the command ended with a signal or a non-zero status (else
// a hit is said as something that happened on the way). "" when none.
std::string limit_hit_text(bool memory, bool processes, bool ended_badly, const nlohmann::json& limits);

}  // namespace runsnack::exec
