#pragma once
// The limits a grant puts on run / shell / cp, stored in grant.terms["run"]
// (no schema change): {"timeout_s":N, "memory_bytes":N, "max_procs":N,
// "disk_quota_bytes":N, "network":bool}. Absent keys take the defaults below.
// Pure.

#include "core/error.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string_view>

namespace runsnack::exec {

// A fork bomb stops here even when the grant says nothing.
inline constexpr std::uint64_t kDefaultMaxProcs = 1024;

struct RunTerms {
  std::optional<double> timeout_s;
  std::optional<std::uint64_t> memory_bytes;
  std::uint64_t max_procs = kDefaultMaxProcs;
  std::optional<std::uint64_t> disk_quota_bytes;
  bool network = false;

  static RunTerms from_json(const nlohmann::json& terms);  // bad fields are ignored (defaults)
  nlohmann::json to_json() const;
};

// "512M", "4G", "1.5GiB", "1000" (bytes) -> bytes.
Result<std::uint64_t> parse_size(std::string_view text);

}  // namespace runsnack::exec
